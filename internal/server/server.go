// Package server serves informerd's CacheService over gRPC from the caches.
// It is the only package that knows gRPC status codes: errors.go maps the
// cache's errors to statuses with messages a person can act on.
package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// Caches is what the server reads: the served resources, by name and all.
type Caches interface {
	Lookup(name string) (pipeline.Served, bool)
	Served() []pipeline.Served
}

// Options bound what one request may ask for.
type Options struct {
	// DefaultPageSize is used when a List sets no limit; MaxPageSize caps
	// the limit a client may ask for.
	DefaultPageSize, MaxPageSize int
	// MaxPageBytes ends a List page early, with a continue token, once its
	// objects' JSON reaches this size, so pages fit a client's default 4 MiB
	// receive limit. A single larger object is still sent alone.
	MaxPageBytes int
	// WatchQueueLength bounds each watch stream's queue of undelivered
	// events; past it the stream is replayed from history. Default
	// fanout.DefaultQueueLength.
	WatchQueueLength int
	// MaxWatches bounds the Watch streams open at once across all clients.
	MaxWatches int
	// Authenticator and Authorizer decide who calls and what it may read;
	// nil means everyone may read everything (--auth-mode=none).
	Authenticator auth.Authenticator
	Authorizer    auth.Authorizer
	// RecheckInterval is how often an open Watch re-authenticates and
	// re-authorizes its caller (through the authorizer's cache), so a
	// revoked permission ends it. Default 1s.
	RecheckInterval time.Duration
	// Limits bound each identity's Watch streams and call rate; nil means
	// only MaxWatches applies.
	Limits *limits.Limiter
	// Observer, if set, is told about deliveries and ended streams.
	Observer Observer
	// Schemas, if set, checks requests' field masks against the
	// resources' schemas; nil checks only their form.
	Schemas Schemas
}

// Observer receives the fan-out's measurements (the metrics package).
type Observer interface {
	// DeliveryObserver returns what records how long a change of resource
	// took from its entry in the cache to being handed to a stream. A stream
	// asks once, so the per-event call does no label lookup.
	DeliveryObserver(resource string) func(time.Duration)
	// StreamEnded: a Watch stream ended, for a bounded reason.
	StreamEnded(resource, reason string)
	// LimitHit: a call was refused by the named limit.
	LimitHit(limit string)
}

type nopObserver struct{}

func (nopObserver) DeliveryObserver(string) func(time.Duration) { return func(time.Duration) {} }
func (nopObserver) StreamEnded(string, string)                  {}
func (nopObserver) LimitHit(string)                             {}

// errShutdown ends every watch when the server stops.
var errShutdown = errors.New("server: shutting down")

// Server implements CacheService over the resources' caches (Get, List) and
// hubs (Watch). Its methods may be called concurrently.
type Server struct {
	pb.UnimplementedCacheServiceServer
	caches Caches
	opts   Options
	// watches counts open Watch streams, against MaxWatches.
	watches atomic.Int64
	// stopping ends, with errShutdown, when Stop is called: every Watch
	// stream ends then, and so do calls waiting for their turn under
	// Limits.
	stopping context.Context
	stop     context.CancelCauseFunc
}

var _ pb.CacheServiceServer = (*Server)(nil)

// New returns a server over caches.
func New(caches Caches, opts Options) *Server {
	if opts.DefaultPageSize <= 0 {
		opts.DefaultPageSize = DefaultPageSize
	}
	if opts.MaxPageSize <= 0 {
		opts.MaxPageSize = DefaultMaxPageSize
	}
	if opts.MaxPageBytes <= 0 {
		opts.MaxPageBytes = DefaultMaxPageBytes
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Authenticator == nil {
		opts.Authenticator = auth.None{}
	}
	if opts.Authorizer == nil {
		opts.Authorizer = auth.None{}
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	s := &Server{caches: caches, opts: opts}
	s.stopping, s.stop = context.WithCancelCause(context.Background())
	return s
}

// Stop ends every watch stream with UNAVAILABLE and the resourceVersion to
// resume from, and every call waiting for its turn under Limits with
// UNAVAILABLE; call it before grpc.Server.GracefulStop, which waits for
// streams to end. It is idempotent.
func (s *Server) Stop() { s.stop(errShutdown) }

// ListResources implements CacheService.
func (s *Server) ListResources(context.Context, *pb.ListResourcesRequest) (*pb.ListResourcesResponse, error) {
	resp := &pb.ListResourcesResponse{}
	for _, p := range s.caches.Served() {
		st := p.Status()
		resp.Resources = append(resp.Resources, &pb.ResourceInfo{
			Name:            st.Name,
			Group:           st.Resolved.GVR.Group,
			Version:         st.Resolved.GVR.Version,
			Kind:            st.Resolved.Kind,
			Namespaced:      st.Resolved.Namespaced,
			Indexes:         p.Cache().IndexNames(),
			Synced:          st.Cache.Synced,
			ResourceVersion: st.Cache.ResourceVersion,
			ObjectCount:     uint64(st.Cache.Objects),
			Restored:        st.Phase == pipeline.Restored,
		})
	}
	return resp, nil
}

// Get implements CacheService. Over gRPC, the service NewGRPC registers
// sends get's encoded response as it is; this method, for callers in
// process, decodes it.
func (s *Server) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	m, err := s.get(ctx, req)
	return decoded(m, err, &pb.GetResponse{})
}

func (s *Server) get(ctx context.Context, req *pb.GetRequest) (*encoded, error) {
	p, err := s.resource(req.GetResource())
	if err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, invalid("name is required")
	}
	// A "/" would make namespace and name another object's cache key
	// (namespace "" and name "a/p" is the key of p in namespace a); no
	// Kubernetes name or namespace holds one.
	if strings.Contains(req.GetName(), "/") || strings.Contains(req.GetNamespace(), "/") {
		return nil, invalid("namespace %q and name %q: neither may contain \"/\"; set namespace and name separately", req.GetNamespace(), req.GetName())
	}
	if err := s.authorize(ctx, attributes("get", p, req.GetNamespace(), req.GetName())); err != nil {
		return nil, err
	}
	m, err := s.mask(ctx, p, req.GetFields())
	if err != nil {
		return nil, err
	}
	key := object.KeyOf(req.GetNamespace(), req.GetName())
	o, ok := p.Cache().Get(key)
	if !ok {
		return nil, objectNotFound(req.GetResource(), key, p.Cache().Stats().ResourceVersion)
	}
	po, err := projected(m, o)
	if err != nil {
		return nil, toStatus(err)
	}
	m2, err := getResponse(po)
	return m2, toStatus(err)
}

// resource finds a served resource by name and checks that its cache has
// synced.
func (s *Server) resource(resource string) (pipeline.Served, error) {
	if resource == "" {
		return nil, invalid("resource is required, e.g. \"pods\"; ListResources names the served ones")
	}
	p, ok := s.caches.Lookup(resource)
	if !ok {
		return nil, unknownResource(resource, s.served())
	}
	select {
	case <-p.Cache().HasSynced():
	default:
		return nil, notSynced(resource, p.Status())
	}
	return p, nil
}

func (s *Server) served() string {
	var names []string
	for _, p := range s.caches.Served() {
		names = append(names, p.Name())
	}
	return strings.Join(names, ", ")
}
