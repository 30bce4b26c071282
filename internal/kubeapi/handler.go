// Package kubeapi serves the Kubernetes API over HTTP from informerd's
// caches, so that an unmodified Kubernetes client (client-go, kubectl, the
// Python and JavaScript clients) can point its kubeconfig at informerd:
// get, list and watch of a cached resource are answered from the cache with
// the API server's semantics; discovery from the API server's answers,
// fetched with informerd's credentials; everything else is forwarded to the API server unchanged, with the
// caller's own bearer token.
//
// It is the second serving layer next to internal/server (gRPC): it reads a
// resource through pipeline.Served, its cache for get and list and its hub
// for watch, and maps the core's errors and event types to the Kubernetes
// API's Status and watch events here, at its own edge.
package kubeapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/pipeline"
)

// Caches is what the handler reads: every served resource.
type Caches interface {
	Served() []pipeline.Served
}

// Observer receives the handler's measurements (the metrics package).
type Observer interface {
	// Request: a request for resource ("" when not a cached resource) and
	// verb ended with code after d (for a watch, when it ended).
	Request(resource, verb string, code int, d time.Duration)
	// WatchStarted and WatchEnded bracket an open watch.
	WatchStarted(resource string)
	WatchEnded(resource string)
	// Forwarded: a request was forwarded to the API server, which answered
	// code (0 when it could not be reached).
	Forwarded(code int)
	// ConsistentRead: a consistent read of resource ended with outcome
	// (OutcomeCurrent, ...).
	ConsistentRead(resource, outcome string)
	// DeliveryObserver returns what records how long a change of resource
	// took from its entry in the cache to its bytes flushed to a watch,
	// as the gRPC server's does (informerd_watch_delivery_delay_seconds).
	DeliveryObserver(resource string) func(time.Duration)
}

type nopObserver struct{}

func (nopObserver) Request(string, string, int, time.Duration)  {}
func (nopObserver) WatchStarted(string)                         {}
func (nopObserver) WatchEnded(string)                           {}
func (nopObserver) Forwarded(int)                               {}
func (nopObserver) ConsistentRead(string, string)               {}
func (nopObserver) DeliveryObserver(string) func(time.Duration) { return func(time.Duration) {} }

// Defaults of Options.
const (
	DefaultMaxWatches     = 10000
	DefaultMaxPageSize    = 5000
	DefaultConsistentWait = 5 * time.Second
	// DefaultContinueLifetime is the API server's default
	// --etcd-compaction-interval: its continue tokens last at least that.
	DefaultContinueLifetime = 5 * time.Minute
	DefaultDiscoveryTTL     = 10 * time.Second
	DefaultMaxRequestBytes  = 3 << 20
)

// Options configure a Handler.
type Options struct {
	// Caches are the served resources.
	Caches Caches
	// Upstream is the API server informerd caches from. Its TLS settings
	// are used to forward requests (with the caller's token, never
	// informerd's own credentials); its credentials are used only for
	// discovery, /version and the resourceVersion of consistent reads.
	Upstream *rest.Config
	// Authenticator and Authorizer decide who may read what from the
	// cache, as for gRPC; nil means everyone may read everything.
	Authenticator auth.Authenticator
	Authorizer    auth.Authorizer
	// Impersonation checks Impersonate-* headers on the requests informerd
	// answers itself (SubjectAccessReviews as the caller, in
	// --auth-mode kubernetes). Nil: a request that impersonates is
	// forwarded, and the API server decides.
	Impersonation authorizer.Authorizer
	// AuditSink and AuditPolicy write audit events for the requests
	// informerd answers itself (--audit-policy-file, --audit-log-path);
	// nil: none.
	AuditSink   audit.Sink
	AuditPolicy audit.PolicyRuleEvaluator
	// Limits bound each identity's watches and list rate, shared with the
	// gRPC listener; nil means only MaxWatches applies.
	Limits *limits.Limiter
	// MaxWatches bounds the watches open at once (default
	// DefaultMaxWatches); MaxPageSize the objects in one list page (a
	// larger limit is clamped); MaxRequestBytes the body of a forwarded
	// request.
	MaxWatches, MaxPageSize int
	MaxRequestBytes         int64
	// ConsistentWait bounds how long a consistent read waits for the cache
	// to reach the API server's current resourceVersion.
	ConsistentWait time.Duration
	// ConsistentFallback is what a consistent read gets when the cache
	// cannot serve it within ConsistentWait: FallbackForward (the
	// default) or FallbackRefuse.
	ConsistentFallback string
	// ContinueLifetime is how long a list's continue tokens are valid
	// (default DefaultContinueLifetime). An older one is 410 Expired with
	// an inconsistent continue token, as the API server's once etcd has
	// compacted the first page's resourceVersion.
	ContinueLifetime time.Duration
	// DisableCompression sends every answer uncompressed; otherwise large
	// answers and WatchList streams are gzipped for clients that accept
	// it, as the API server's (withCompression).
	DisableCompression bool
	// HTTP2MaxStreams bounds the concurrent streams of one HTTP/2
	// connection (MAX_CONCURRENT_STREAMS): a client with more requests
	// open, such as a process whose informers share one transport, opens
	// another connection. 0: MaxWatches + http2OtherStreams, every watch
	// on one connection.
	HTTP2MaxStreams int
	// DiscoveryTTL is how long a CRD's printer columns are reused.
	DiscoveryTTL time.Duration
	Observer     Observer
	Log          *slog.Logger
}

// Handler serves the Kubernetes API. Its methods may be called
// concurrently; Stop ends every watch.
type Handler struct {
	opts      Options
	infos     *request.RequestInfoFactory
	forward   http.Handler
	chain     http.Handler
	discovery *discovery
	columns   *printerColumns
	upstream  *upstreamRV
	prober    *prober
	forms     *forms
	watches   atomic.Int64
	// clock prints a Table's ages; nil is time.Now (tests set it).
	clock func() time.Time
	// built is when New built the handler: reads wait while a cache
	// resolves its resource for resolvingGrace after it (resolving).
	built time.Time

	// stopping is closed by Stop: every watch ends.
	stopping chan struct{}
	stopOnce sync.Once
}

// New builds a handler. It starts nothing and does not contact the API
// server.
func New(o Options) (*Handler, error) {
	if o.Caches == nil || o.Upstream == nil {
		return nil, errors.New("kubeapi: Caches and Upstream are required")
	}
	if o.MaxWatches <= 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.MaxPageSize <= 0 {
		o.MaxPageSize = DefaultMaxPageSize
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.ContinueLifetime <= 0 {
		o.ContinueLifetime = DefaultContinueLifetime
	}
	if o.ConsistentWait <= 0 {
		o.ConsistentWait = DefaultConsistentWait
	}
	switch o.ConsistentFallback {
	case "":
		o.ConsistentFallback = FallbackForward
	case FallbackForward, FallbackRefuse:
	default:
		return nil, fmt.Errorf("kubeapi: consistent-read fallback %q: want %q or %q", o.ConsistentFallback, FallbackForward, FallbackRefuse)
	}
	if o.DiscoveryTTL <= 0 {
		o.DiscoveryTTL = DefaultDiscoveryTTL
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Authenticator == nil {
		o.Authenticator = auth.None{}
	}
	if o.Authorizer == nil {
		o.Authorizer = auth.None{}
	}
	fwd, err := newForwarder(o.Upstream, o.MaxRequestBytes, o.Observer, o.Log)
	if err != nil {
		return nil, err
	}
	api, err := newAPIServer(o.Upstream)
	if err != nil {
		return nil, err
	}
	h := &Handler{built: time.Now(),
		opts: o,
		infos: &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
		forward:   fwd,
		discovery: newDiscovery(api),
		columns:   newPrinterColumns(api, o.DiscoveryTTL),
		upstream:  newUpstreamRV(api),
		forms:     newForms(DefaultMaxFormBytes),
		stopping:  make(chan struct{}),
	}
	h.prober = newProber(o.Log, api, h.upstream)
	h.chain = h.buildChain()
	return h, nil
}

// now is the time a Table's ages are printed at.
func (h *Handler) now() time.Time {
	if h.clock == nil {
		return time.Now()
	}
	return h.clock()
}

// Stop ends every open watch (its client watches again, elsewhere or once
// informerd is back) and refuses new ones. It is idempotent.
func (h *Handler) Stop() { h.stopOnce.Do(func() { close(h.stopping) }) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.chain.ServeHTTP(w, r) }

// buildChain puts the filters in kube-apiserver's order (its
// DefaultBuildHandlerChain), one concern each: the canonical path, the
// request's facts, then, for the requests informerd answers itself, audit
// ID, the request's deadline, authentication, audit, impersonation and authorization before the
// handler. Forwarded requests pass none of the auth filters: the API
// server applies its own to the caller's credentials.
func (h *Handler) buildChain() http.Handler {
	var self http.Handler = http.HandlerFunc(h.serve)
	self = h.withAuthorization(self)
	self = h.withImpersonation(self)
	self = h.withAudit(self)
	self = h.withAuthentication(self, h.withFailedAuthenticationAudit(http.HandlerFunc(unauthorized)))
	self = h.withRequestDeadline(self)
	self = withAuditInit(self)
	self = withPresentation(self)
	self = h.withCompression(self)
	return withCanonicalPath(h.withRoute(self, h.forward))
}

// serve answers a request the chain has authenticated and authorized:
// discovery, or a get, list or watch of a cache.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	f := factsOf(r)
	if f.kind == kindDiscovery {
		h.serveDiscovery(w, r)
		return
	}
	res := f.res
	rec := w // withRoute's recorder, which counts the answer
	caller, _ := request.UserFrom(r.Context())
	out, err := negotiateOutput(r, kindOf(res), builtin(res.Resolved()), f.info.Verb)
	if out != nil && out.media == mediaYAML && (err != nil || f.info.Verb != "watch") {
		// A get's or list's answer, or an error negotiated as YAML (a
		// YAML watch's 406), converted from the JSON.
		y := &yamlWriter{ResponseWriter: rec}
		defer y.finish()
		rec = y
	}
	if out != nil && out.media == mediaProtobuf {
		pe := &protobufErrors{ResponseWriter: rec}
		defer pe.finish()
		rec = pe
	}
	if err != nil {
		writeStatus(rec, asStatus(err))
		return
	}
	f.out = out
	if !ready(rec, r, res) {
		return
	}
	switch f.info.Verb {
	case "get":
		h.get(rec, r, f)
	case "list":
		// A list's first page counts against its caller's list rate, as
		// a gRPC List does; continue pages do not.
		if h.opts.Limits != nil && r.URL.Query().Get("continue") == "" {
			if err := h.opts.Limits.StartList(r.Context(), limitClient(r, caller)); err != nil {
				writeStatus(rec, limitStatus(rec, err))
				return
			}
		}
		h.list(rec, r, f)
	case "watch":
		if h.opts.Limits != nil {
			release, err := h.opts.Limits.StartWatch(r.Context(), limitClient(r, caller))
			if err != nil {
				writeStatus(rec, limitStatus(rec, err))
				return
			}
			defer release()
		}
		h.watch(rec, r, f)
	}
}

// lookup returns the served resource a get, list or watch of info reads
// and the namespace it reads in the cache ("" for a cluster-scoped
// resource), or nil when informerd does not cache it in that version, or
// caches only part of what the request asks for (the configuration narrows
// it to another namespace or by selectors), or the request is for a
// subresource or another verb: such requests are forwarded.
//
// Scope comes from the resource's discovery (Resolved().Namespaced), once
// per request: a cluster-scoped resource under a namespaced path is not
// served (the API server has no such route and answers 404), except a
// Namespace's own path, /api/v1/namespaces/NAME, where RequestInfo puts
// the name in Namespace too.
func (h *Handler) lookup(info *request.RequestInfo) (pipeline.Served, string) {
	switch info.Verb {
	case "get", "list", "watch":
	default:
		return nil, ""
	}
	if info.Subresource != "" {
		return nil, ""
	}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	for _, s := range h.opts.Caches.Served() {
		if s.Resolved().GVR != gvr {
			continue
		}
		ns := info.Namespace
		if !s.Resolved().Namespaced {
			if ns != "" && !isNamespacePath(info) {
				return nil, ""
			}
			ns = ""
		}
		if !s.Covers(ns) {
			return nil, ""
		}
		return s, ns
	}
	return nil, ""
}

// readVerb reports whether info is a read a cache could answer: a get,
// list or watch of a resource, not of a subresource.
func readVerb(info *request.RequestInfo) bool {
	switch info.Verb {
	case "get", "list", "watch":
		return info.Subresource == ""
	}
	return false
}

// resolvingGrace bounds how long after start reads wait for the caches to
// resolve their resources: discovery answers in milliseconds when the API
// server is up, and a cache that cannot resolve for longer (its API group
// unavailable) must not hold up reads of other resources.
const resolvingGrace = 30 * time.Second

// resolving reports whether, within resolvingGrace of start, a cache has
// not yet resolved its resource through discovery: a read no cache claims
// may then be of that resource.
func (h *Handler) resolving() bool {
	if time.Since(h.built) > resolvingGrace {
		return false
	}
	for _, s := range h.opts.Caches.Served() {
		if s.Resolved().GVR.Empty() && s.Status().Phase == pipeline.Resolving {
			return true
		}
	}
	return false
}

// awaitResolved looks info's resource up again until a cache claims it or
// none is resolving any more (resolving), for at most initializingWait;
// busy reports whether, when no cache claimed it, one was still resolving.
// resolving() waits for a cache that is restoring its state, so a cache
// may claim the resource by the time it returns: the lookup after it
// sees that.
func (h *Handler) awaitResolved(r *http.Request, info *request.RequestInfo) (res pipeline.Served, ns string, busy bool) {
	deadline := time.Now().Add(initializingWait)
	for {
		busy = h.resolving()
		if res, ns = h.lookup(info); res != nil || !busy || time.Now().After(deadline) {
			return res, ns, busy && res == nil
		}
		select {
		case <-r.Context().Done():
			return nil, "", true
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isNamespacePath reports whether info is a request for one Namespace at
// its own path, /api/v1/namespaces/NAME (or /api/v1/watch/namespaces/NAME),
// which RequestInfo reads as namespace NAME, resource namespaces, name
// NAME; /api/v1/namespaces/A/namespaces/B is not one.
func isNamespacePath(info *request.RequestInfo) bool {
	if info.APIGroup != "" || info.Resource != "namespaces" || info.Name != info.Namespace {
		return false
	}
	rest := strings.TrimPrefix(strings.TrimSuffix(info.Path, "/"), "/"+info.APIPrefix+"/"+info.APIVersion+"/")
	rest = strings.TrimPrefix(rest, "watch/")
	return rest == "namespaces/"+info.Name
}

// limitClient names the client whose limits a request counts against, as
// for gRPC: the authenticated user, or for an anonymous caller
// (--auth-mode none) its connection.
func limitClient(r *http.Request, u user.Info) string {
	if u.GetName() == user.Anonymous {
		return "connection " + r.RemoteAddr
	}
	return fmt.Sprintf("user %q", u.GetName())
}

// recorder remembers the status code written, for metrics, and lets a
// watch flush.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (Flush,
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
