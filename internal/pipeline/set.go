package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/reflector"
	"github.com/informerd/informerd/internal/state"
)

// Set runs a pipeline per configured resource. Run is called once; every
// other method may be called concurrently with it.
type Set struct {
	pipelines []*Pipeline
	source    Source
	log       *slog.Logger
	ingest    IngestObserver
	state     *state.Dir // nil without --state-dir

	clientOptions reflector.ClientOptions
	hubOptions    fanout.Options
	checkOptions  CheckOptions
	compression   CompressionOptions
}

// IngestObserver is told how long each change took from its receipt from the
// API server to its entry in the cache.
type IngestObserver interface {
	ObserveIngest(resource string, d time.Duration)
}

// Option configures a Set.
type Option func(*Set)

// WithIngestObserver reports ingest delays to o.
func WithIngestObserver(o IngestObserver) Option { return func(s *Set) { s.ingest = o } }

// WithState keeps every resource's cache in dir: restored at start,
// written while running.
func WithState(dir *state.Dir) Option { return func(s *Set) { s.state = dir } }

// WithClientOptions tunes the API server client (reflector.ClientOptions).
func WithClientOptions(o reflector.ClientOptions) Option {
	return func(s *Set) { s.clientOptions = o }
}

// WithConsistencyChecks checks every resource's cache against the API
// server as o says (--consistency-check-*); without it, no checks run.
func WithConsistencyChecks(o CheckOptions) Option {
	return func(s *Set) { s.checkOptions = o }
}

// WithMaxProjections bounds the distinct field masks each resource's
// watchers may use at once (--max-projections).
func WithMaxProjections(n int) Option {
	return func(s *Set) { s.hubOptions.MaxProjections = n }
}

// NewSet builds the pipelines of c against the API server of restConfig.
// It starts nothing and does not contact the API server.
func NewSet(c *config.Config, restConfig *rest.Config, log *slog.Logger, opts ...Option) (*Set, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	s := &Set{log: log}
	for _, o := range opts {
		o(s)
	}
	client, err := reflector.NewClient(restConfig, s.clientOptions)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	if err := s.build(c, apiServer{client: client, mapper: mapper, meta: meta}); err != nil {
		return nil, err
	}
	return s, nil
}

// NewSetFrom builds the pipelines of c over src, another source than the
// API server (an upstream informerd). It starts nothing.
func NewSetFrom(c *config.Config, src Source, log *slog.Logger, opts ...Option) (*Set, error) {
	s := &Set{log: log}
	for _, o := range opts {
		o(s)
	}
	if err := s.build(c, src); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Set) build(c *config.Config, src Source) error {
	s.source = src
	for _, r := range c.Resources {
		p, err := newPipeline(c, r, s.log, s.hubOptions)
		if err != nil {
			return err
		}
		p.ingest = s.ingest
		p.checkOpts = s.checkOptions
		p.compress = s.compression
		if s.state != nil {
			p.state = s.state.Resource(r.Resource, state.Source{
				Namespace: r.Namespace, LabelSelector: r.LabelSelector, FieldSelector: r.FieldSelector,
				StripManagedFields: c.StripManagedFields(r), Upstream: upstreamPart(r),
			})
		}
		s.pipelines = append(s.pipelines, p)
	}
	return nil
}

// Served returns the resources in configuration order, for the serving
// layers.
func (s *Set) Served() []Served {
	out := make([]Served, len(s.pipelines))
	for i, p := range s.pipelines {
		out[i] = p
	}
	return out
}

// Lookup finds a resource by its configured or canonical name.
func (s *Set) Lookup(name string) (Served, bool) {
	for _, p := range s.pipelines {
		if p.Configured() == name || p.Name() == name {
			return p, true
		}
	}
	return nil, false
}

// Reports returns every resource's Report, in configuration order.
func (s *Set) Reports() []Report {
	out := make([]Report, len(s.pipelines))
	for i, p := range s.pipelines {
		out[i] = p.Report()
	}
	return out
}

// Progress returns, in configuration order, each resource's configured
// name, cache figures (Report.Status.Cache), upstream counters
// (Report.Upstream) and durable state's figures (Report.State) only: it
// visits no watcher and reads no index, so a poller may call it often.
func (s *Set) Progress() []Report {
	out := make([]Report, len(s.pipelines))
	for i, p := range s.pipelines {
		out[i].Cache = p.index.Stats()
		out[i].Configured = p.cfg.Resource
		p.mu.Lock()
		if p.refl != nil {
			out[i].Upstream = p.refl.Signals()
		}
		p.mu.Unlock()
		if p.state != nil {
			st := p.state.Stats()
			out[i].State = &st
		}
	}
	return out
}

// WaitSynced waits until every pipeline has completed its first list, or
// ctx ends (returning its error).
func (s *Set) WaitSynced(ctx context.Context) error {
	for _, p := range s.pipelines {
		select {
		case <-p.index.HasSynced():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Run runs every pipeline until ctx is done and returns when all have
// stopped. A pipeline's error is logged; it does not stop the others,
// except ErrForeignState, which stops them all and is returned.
func (s *Set) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, p := range s.pipelines {
		wg.Go(func() {
			err := p.Run(ctx, s.source)
			switch {
			case errors.Is(err, ErrForeignState):
				cancel(err)
			case err != nil:
				s.log.Error("pipeline stopped", "resource", p.Configured(), "err", err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, ErrForeignState) {
		return err
	}
	return nil
}
