// Package pipeline runs the cache of one configured resource — reflector →
// deltafifo → indexer → fanout — and a Set of them for the whole
// configuration. It resolves kubectl-style names through discovery, waits
// for resources that do not exist yet (a CRD not installed) and reports
// their state. The serving layers (gRPC today) read a resource through the
// Served interface: its cache for Get and List, its hub for Watch.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
	"github.com/informerd/informerd/internal/state"
)

// Phase is where a pipeline is in its life.
type Phase string

// Phases.
const (
	// Resolving: looking the resource up in discovery.
	Resolving Phase = "Resolving"
	// NotFound: the API server does not serve it (yet); retried.
	NotFound Phase = "NotFound"
	// Syncing: listing for the first time.
	Syncing Phase = "Syncing"
	// Restored: the cache was restored from --state-dir at start and is
	// served, but the API server has not confirmed it yet (accepted the
	// watch resumed from its resourceVersion, or answered a relist).
	Restored Phase = "Restored"
	// Synced: the cache is complete and follows the watch.
	Synced Phase = "Synced"
)

// Resolved is what discovery says about a resource.
type Resolved struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// CanonicalName is "plural" for the core group, "plural.group" otherwise.
func (r Resolved) CanonicalName() string {
	if r.GVR.Group == "" {
		return r.GVR.Resource
	}
	return r.GVR.Resource + "." + r.GVR.Group
}

// Served is one cached resource as a serving layer reads it: its names and
// state, its cache for Get and List, and its hub for Watch. *Pipeline is
// one. Every method may be called concurrently.
type Served interface {
	// Name is the name clients and metrics see: the canonical name once
	// resolved ("deployments.apps"), else the name as configured.
	Name() string
	// Configured is the name as configured ("deploy").
	Configured() string
	// Resolved is what the name resolved to; zero before resolution.
	Resolved() Resolved
	// Status is the resource's state.
	Status() Status
	// Cache holds the objects and the history; it exists, empty and
	// unsynced, before the pipeline runs.
	Cache() *indexer.Indexer
	// Hub fans the cache's events out to watchers.
	Hub() *fanout.Hub
	// Covers reports whether the cache holds every object of the resource
	// in namespace (in all namespaces when ""): false when the
	// configuration narrows the watch to another namespace or by a label
	// or field selector.
	Covers(namespace string) bool
	// IndexFields maps the object field each plain-path JSONPath index
	// reads ("spec.nodeName" for "{.spec.nodeName}") to that index's name,
	// for field selectors.
	IndexFields() map[string]string
	// Restored reports whether the cache serves what was restored from
	// --state-dir at start and the API server has not confirmed yet: it
	// may lack changes made while informerd was down.
	Restored() bool
	// Progress moves the cache to rv as an API server bookmark would,
	// once the caller has shown the API server reached rv with no change
	// to the resource after the cache's resourceVersion that the cache or
	// its queue lacks; false when it cannot (a restored cache not yet
	// confirmed, a gap in the watch, the pipeline not running).
	Progress(rv string) bool
}

var _ Served = (*Pipeline)(nil)

// Status is a pipeline's state at one moment.
type Status struct {
	// Name is the name clients see: canonical once resolved, else as
	// configured (Served.Name). Configured is the name as configured.
	Name, Configured string
	Phase            Phase
	Resolved         Resolved // zero until resolved
	// LastError is the most recent problem, if any (not found, list or
	// watch failure).
	LastError string
	Cache     indexer.Stats
	// RestoredFrom is when the state the cache was restored from at start
	// was written; zero when it was not restored. Phase is Restored until
	// the API server confirms it.
	RestoredFrom time.Time
}

// Report is a resource's Status with every figure behind its metrics and
// /readyz: the upstream counters, the watch streams' and the indexes'. It
// visits every watcher, so it is for a scrape, not a request's path.
type Report struct {
	Status
	// Upstream are the reflector's counters; nil before resolution.
	Upstream *reflector.Signals
	// Watch describes the resource's watchers.
	Watch fanout.Stats
	// IndexErrors counts, by index name, the objects an index expression
	// failed on (cached without a value in that index).
	IndexErrors map[string]int64
	// State describes the resource's durable state; nil without
	// --state-dir.
	State *state.Stats
	// Consistency is the integrity checks so far.
	Consistency Consistency
	// Compression is the mode and codec figures of the cache's
	// compression (--cache-compression).
	Compression Compression
}

// Pipeline caches one resource and fans its changes out: reflector →
// deltafifo → indexer → fanout. Run is called once; every other method may
// be called concurrently with it.
type Pipeline struct {
	cfg     config.Resource
	encoder *object.Encoder
	index   *indexer.Indexer
	hub     *fanout.Hub
	fifo    *deltafifo.FIFO
	log     *slog.Logger
	ingest  IngestObserver  // may be nil
	state   *state.Resource // nil without --state-dir

	// restoredFrom is set once, before Run starts the reflector; confirmed
	// when the API server has confirmed the restored cache.
	restoredFrom time.Time
	confirmed    atomic.Bool

	// checkOpts configure the integrity checks; checks records them.
	checkOpts CheckOptions
	checks    checks

	// compress configures the compression of cold objects, which codec
	// makes and reads (coolLoop).
	compress CompressionOptions
	codec    *object.Codec

	mu        sync.Mutex
	phase     Phase
	resolved  Resolved
	lastError string
	refl      *reflector.Reflector
	src       Source // set by Run
}

// New builds the pipeline for one configured resource. It starts nothing.
func New(c *config.Config, r config.Resource, log *slog.Logger) (*Pipeline, error) {
	return newPipeline(c, r, log, fanout.Options{})
}

func newPipeline(c *config.Config, r config.Resource, log *slog.Logger, hub fanout.Options) (*Pipeline, error) {
	specs := make([]object.IndexSpec, 0, len(r.Indexes))
	for _, ix := range r.Indexes {
		specs = append(specs, object.IndexSpec{Name: ix.Name, Label: ix.Label, JSONPath: ix.JSONPath})
	}
	enc, err := object.NewEncoder(specs, c.StripManagedFields(r))
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.Resource, err)
	}
	ix := indexer.New(enc.IndexNames(), indexer.Options{
		HistoryMaxEvents: c.History.MaxEvents,
		HistoryMaxAge:    c.History.MaxAge.Duration,
	})
	p := &Pipeline{
		cfg:     r,
		encoder: enc,
		index:   ix,
		hub:     fanout.New(ix, hub),
		fifo:    deltafifo.New(ix, c.QueueLength),
		log:     log.With("resource", r.Resource),
		phase:   Resolving,
		codec:   object.NewCodec(object.CodecOptions{}),
	}
	p.codec.OnDamage(p.onDamage)
	return p, nil
}

// Name implements Served: the canonical name once resolved, else the name
// as configured. It is on every request's path, so it reads no cache
// statistics.
func (p *Pipeline) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nameLocked()
}

func (p *Pipeline) nameLocked() string {
	if p.resolved.GVR.Resource == "" {
		return p.cfg.Resource
	}
	return p.resolved.CanonicalName()
}

// Configured implements Served.
func (p *Pipeline) Configured() string { return p.cfg.Resource }

// Resolved implements Served. It reads no cache statistics.
func (p *Pipeline) Resolved() Resolved {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resolved
}

// Covers implements Served.
func (p *Pipeline) Covers(namespace string) bool {
	c := p.cfg
	if u := c.UpstreamSelector; u != nil && (u.LabelSelector != "" || u.Index != nil || (u.Namespace != "" && u.Namespace != namespace)) {
		return false
	}
	return c.LabelSelector == "" && c.FieldSelector == "" && (c.Namespace == "" || c.Namespace == namespace)
}

// Restored implements Served.
func (p *Pipeline) Restored() bool { return !p.restoredAt().IsZero() && !p.confirmed.Load() }

// Progress implements Served.
func (p *Pipeline) Progress(rv string) bool {
	if p.Restored() {
		return false
	}
	p.mu.Lock()
	refl := p.refl
	p.mu.Unlock()
	return refl != nil && refl.Progress(rv)
}

// IndexFields implements Served.
func (p *Pipeline) IndexFields() map[string]string {
	out := map[string]string{}
	for _, ix := range p.cfg.Indexes {
		if f, ok := fieldPath(ix.JSONPath); ok {
			out[f] = ix.Name
		}
	}
	return out
}

// fieldPath turns a JSONPath of plain field names, "{.spec.nodeName}", into
// the field path a field selector names, "spec.nodeName".
func fieldPath(jsonPath string) (string, bool) {
	inner, ok := strings.CutPrefix(jsonPath, "{.")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "}")
	if !ok || inner == "" {
		return "", false
	}
	for _, part := range strings.Split(inner, ".") {
		if part == "" || strings.ContainsFunc(part, func(r rune) bool {
			return !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
		}) {
			return "", false
		}
	}
	return inner, true
}

// Cache implements Served.
func (p *Pipeline) Cache() *indexer.Indexer { return p.index }

// Hub implements Served.
func (p *Pipeline) Hub() *fanout.Hub { return p.hub }

// Status returns the pipeline's current state.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	s := Status{Name: p.nameLocked(), Configured: p.cfg.Resource, Phase: p.phase, Resolved: p.resolved, LastError: p.lastError}
	refl := p.refl
	p.mu.Unlock()
	s.Cache = p.index.Stats()
	s.RestoredFrom = p.restoredAt()
	switch {
	case !s.RestoredFrom.IsZero() && !p.confirmed.Load():
		s.Phase = Restored
	case s.Cache.Synced:
		s.Phase = Synced
	}
	if refl != nil {
		if e, _ := refl.Signals().LastError.Load().(string); e != "" {
			s.LastError = e
		}
	}
	return s
}

// Report returns the pipeline's Status with its figures; it visits every
// watcher.
func (p *Pipeline) Report() Report {
	r := Report{Status: p.Status(), Watch: p.hub.Stats(), Consistency: p.Consistency(), Compression: p.Compression()}
	counts := p.encoder.IndexErrors()
	r.IndexErrors = make(map[string]int64, len(counts))
	for i, name := range p.encoder.IndexNames() {
		r.IndexErrors[name] = counts[i]
	}
	p.mu.Lock()
	if p.refl != nil {
		r.Upstream = p.refl.Signals()
	}
	p.mu.Unlock()
	if p.state != nil {
		st := p.state.Stats()
		r.State = &st
	}
	return r
}

func (p *Pipeline) setPhase(ph Phase, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = ph
	if err != nil {
		p.lastError = err.Error()
	} else {
		p.lastError = ""
	}
}

// Run resolves the resource (waiting while it does not exist), then lists
// and watches it into the cache until ctx is done. It returns after every
// goroutine it started has exited, and ends every watcher of the hub with
// fanout.ErrClosed: nothing is served from a cache that stopped following
// the API server.
func (p *Pipeline) Run(ctx context.Context, src Source) error {
	defer p.hub.Close(nil)
	res, resume := p.restore()
	if resume == "" {
		var err error
		if res, err = p.resolve(ctx, src); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	p.log.Info("caching", "gvr", res.GVR.String(), "kind", res.Kind, "namespaced", res.Namespaced, "resumeFrom", resume)

	lw, client := src.ListWatch(res, p.cfg, p.prepare)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	refl := reflector.New(lw, p.encoder, p.fifo, reflector.Options{
		Name: p.cfg.Resource, Client: client, Log: p.log,
		Resume: resume, OnConfirmed: p.confirm,
		OnForeign: func(err error) { cancel(p.foreign(err)) },
	})
	p.mu.Lock()
	p.refl, p.src = refl, src
	p.mu.Unlock()
	p.setPhase(Syncing, nil)

	// The durable state is written until the cache has stopped, so its
	// last write holds every change the cache applied.
	var writer sync.WaitGroup
	wctx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopWriter(); writer.Wait() }()
	if p.state != nil {
		writer.Go(func() { _ = p.state.Run(wctx, p.index, stateResolved(res)) })
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		refl.Run(rctx)
		p.fifo.Close() // unblocks the consumer
	})
	wg.Go(func() { p.checkLoop(rctx) })
	wg.Go(func() { p.coolLoop(rctx) })
	err := p.consume(rctx, res.CanonicalName())
	cause := context.Cause(rctx)
	cancel(nil)
	p.fifo.Close() // unblocks a reflector waiting on a full queue
	wg.Wait()
	if errors.Is(cause, ErrForeignState) {
		return cause
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, deltafifo.ErrClosed) {
		return nil
	}
	return err
}

// source is the Source Run reads from; nil before Run.
func (p *Pipeline) source() Source {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.src
}

// prepare readies each object the upstream watch reads (Client.ListWatch):
// one the cache holds at the same resourceVersion, as a relist brings
// every object that did not change, shares the cached bytes (compressed,
// when cold) unless they were found damaged; any other is transformed and
// copied once.
func (p *Pipeline) prepare(r *object.Raw) {
	if o, ok := p.index.Get(object.KeyOf(r.Namespace, r.Name)); ok && o.ResourceVersion == r.ResourceVersion && o.UID == string(r.UID) && r.ResourceVersion != "" && !p.index.Damaged(o) {
		object.PrepareAs(r, o)
		return
	}
	p.encoder.Prepare(r)
}

// consume applies the queue's deltas to the cache until the queue closes:
// those Run pops, and those the reflector applies itself (deltafifo.Run).
func (p *Pipeline) consume(ctx context.Context, resource string) error {
	return p.fifo.Run(ctx, func(deltas []deltafifo.Delta) {
		p.index.Apply(deltas)
		if p.ingest == nil {
			return
		}
		now := time.Now()
		for _, d := range deltas {
			switch d.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				p.ingest.ObserveIngest(resource, now.Sub(d.Received))
			}
		}
	})
}

// resolveBackoff spaces the lookups of a resource discovery does not know.
// Past the cap it keeps trying every 30s (with jitter) until ctx ends.
var resolveBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}

// resolve looks the resource up, retrying with backoff (up to 30s apart)
// while discovery does not know it.
func (p *Pipeline) resolve(ctx context.Context, src Source) (Resolved, error) {
	var res Resolved
	err := resolveBackoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		var err error
		if res, err = src.Resolve(ctx, p.cfg.Resource); err == nil {
			p.mu.Lock()
			p.resolved = res
			p.mu.Unlock()
			return true, nil
		}
		if isNotServed(err) {
			p.setPhase(NotFound, err)
		} else {
			p.setPhase(Resolving, fmt.Errorf("resolve %q: %w", p.cfg.Resource, err))
		}
		p.log.Warn("resource not available; will retry", "err", err)
		src.Reset() // find a CRD installed meanwhile
		return false, nil
	})
	return res, err
}
