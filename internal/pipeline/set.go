package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/reflector"
)

// Set runs a pipeline per configured resource. Run is called once; Lookup,
// Pipelines and Synced may be called concurrently with it.
type Set struct {
	pipelines []*Pipeline
	client    *reflector.Client
	mapper    Mapper
	log       *slog.Logger
	ingest    IngestObserver
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

// NewSet builds the pipelines of c against the API server of restConfig.
// It starts nothing and does not contact the API server.
func NewSet(c *config.Config, restConfig *rest.Config, log *slog.Logger, opts ...Option) (*Set, error) {
	client, err := reflector.NewClient(restConfig)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	s := &Set{
		client: client,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		log:    log,
	}
	for _, o := range opts {
		o(s)
	}
	for _, r := range c.Resources {
		p, err := New(c, r, log)
		if err != nil {
			return nil, err
		}
		p.ingest = s.ingest
		s.pipelines = append(s.pipelines, p)
	}
	return s, nil
}

// Pipelines returns the pipelines in configuration order.
func (s *Set) Pipelines() []*Pipeline { return s.pipelines }

// Lookup finds a pipeline by its configured or canonical name.
func (s *Set) Lookup(name string) (*Pipeline, bool) {
	for _, p := range s.pipelines {
		if p.Name() == name || p.canonicalName() == name {
			return p, true
		}
	}
	return nil, false
}

// Synced reports whether every pipeline has completed its first list, and
// names those that have not.
func (s *Set) Synced() (bool, []string) {
	var pending []string
	for _, p := range s.pipelines {
		if !p.Indexer().Stats().Synced {
			pending = append(pending, p.Name())
		}
	}
	return len(pending) == 0, pending
}

// Run runs every pipeline until ctx is done and returns when all have
// stopped. A pipeline's error is logged; it does not stop the others.
func (s *Set) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range s.pipelines {
		wg.Go(func() {
			if err := p.Run(ctx, s.client, s.mapper); err != nil {
				s.log.Error("pipeline stopped", "resource", p.Name(), "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}
