package fanout

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"k8s.io/apimachinery/pkg/watch"
)

// Errors a watcher ends with; callers branch with errors.Is / errors.As.
var (
	// ErrClosed: the hub is shutting down.
	ErrClosed = errors.New("fanout: closed")
)

// TooSlowError ends a watcher that fell out of the history window.
type TooSlowError struct {
	// LastResourceVersion is the RV of the last item handed to the client.
	LastResourceVersion string
}

func (e *TooSlowError) Error() string {
	return "fanout: watcher fell behind the history window (last resourceVersion sent: " + e.LastResourceVersion + ")"
}

// Options tune a Hub.
type Options struct {
	// QueueLength bounds each watcher's queue of undelivered events, unless
	// its WatchOptions set another bound. Default DefaultQueueLength.
	QueueLength int
	// MaxProjections bounds the distinct field masks in use at once (a
	// watch with one more is refused); default DefaultMaxProjections.
	MaxProjections int
}

// DefaultQueueLength is a watcher's queue bound when nothing sets one.
const DefaultQueueLength = 1000

// bucket is an index value a watcher is registered under.
type bucket struct {
	index int
	value string
}

// Hub fans one resource's events out to its watchers. OnEvent is called by
// the indexer's dispatching goroutine, one event at a time, outside the
// indexer's lock; Watch and Close may be called from any goroutine.
//
// Lock order: indexer (Indexer.mu, taken by Join and ReplayAfter around
// their callbacks) → Hub.mu → Watcher.mu. A lock is never taken while a
// later one in this order is held: OnEvent lists its targets under Hub.mu
// and delivers to each after releasing it; Watcher.end releases
// Watcher.mu before it unregisters from the hub.
type Hub struct {
	ix   *indexer.Indexer
	opts Options

	mu       sync.Mutex
	buckets  map[bucket]map[*Watcher]struct{}
	all      map[*Watcher]struct{} // watchers that no index value narrows
	watchers map[*Watcher]struct{}
	closed   error
	cancel   func()

	// targets is OnEvent's list of the watchers an event may concern,
	// reused from one event to the next: OnEvent calls do not overlap.
	targets []*Watcher

	coalesced atomic.Int64 // changes absorbed by coalescing watchers

	// projections are the field masks in use, by key.
	projections map[string]*shared
	pstats      projectionStats
}

var _ indexer.Listener = (*Hub)(nil)

// New returns a hub for ix and registers it as ix's listener.
func New(ix *indexer.Indexer, opts Options) *Hub {
	if opts.QueueLength <= 0 {
		opts.QueueLength = DefaultQueueLength
	}
	if opts.MaxProjections <= 0 {
		opts.MaxProjections = DefaultMaxProjections
	}
	h := &Hub{
		ix: ix, opts: opts,
		buckets:  map[bucket]map[*Watcher]struct{}{},
		all:      map[*Watcher]struct{}{},
		watchers: map[*Watcher]struct{}{},

		projections: map[string]*shared{},
	}
	h.cancel = ix.AddListener(h)
	return h
}

// OnEvent implements indexer.Listener: it queues ev for every watcher it
// concerns, without blocking.
func (h *Hub) OnEvent(ev indexer.Event) {
	h.mu.Lock()
	if ev.Type == watch.Bookmark {
		h.targets = h.targets[:0]
		for w := range h.watchers {
			h.targets = append(h.targets, w)
		}
	} else {
		h.candidatesLocked(ev)
	}
	targets := h.targets
	h.mu.Unlock()
	for _, w := range targets {
		if ev.Type == watch.Bookmark {
			w.upstreamBookmark(ev)
		} else {
			w.deliver(ev)
		}
	}
	clear(targets) // drop the references until the next event
}

// candidatesLocked puts in h.targets the watchers that may see ev's change
// from ev.Prev to ev.Object: those registered under any index value either
// state has, and those registered under none. A watcher under several of
// those values is listed once: the first visit stamps it with ev.Seq.
func (h *Hub) candidatesLocked(ev indexer.Event) {
	h.targets = h.targets[:0]
	for w := range h.all {
		h.targets = append(h.targets, w)
	}
	for _, o := range [2]*object.Object{ev.Prev, ev.Object} {
		if o == nil {
			continue
		}
		for i, vs := range o.Values {
			for _, v := range vs {
				for w := range h.buckets[bucket{i, v}] {
					if w.stamp != ev.Seq {
						w.stamp = ev.Seq
						h.targets = append(h.targets, w)
					}
				}
			}
		}
	}
}

func (h *Hub) addLocked(w *Watcher) {
	h.watchers[w] = struct{}{}
	bs := w.buckets()
	if len(bs) == 0 {
		h.all[w] = struct{}{}
		return
	}
	for _, b := range bs {
		set := h.buckets[b]
		if set == nil {
			set = map[*Watcher]struct{}{}
			h.buckets[b] = set
		}
		set[w] = struct{}{}
	}
}

func (h *Hub) remove(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watchers[w]; !ok {
		return
	}
	h.releaseLocked(w)
	delete(h.watchers, w)
	delete(h.all, w)
	for _, b := range w.buckets() {
		delete(h.buckets[b], w)
		if len(h.buckets[b]) == 0 {
			delete(h.buckets, b)
		}
	}
}

// Stats describes the watchers at one moment, for metrics.
type Stats struct {
	Watchers int
	// MaxQueueDepth is the longest queue of undelivered changes.
	MaxQueueDepth int
	// OldestUndelivered is when the oldest change still waiting for any
	// watcher entered the cache; zero when nothing waits.
	OldestUndelivered time.Time
	// Coalesced counts changes absorbed by coalescing watchers, ever.
	Coalesced int64
	// Projections is the number of distinct field masks in use.
	Projections int
	// ProjectionEncodes counts objects projected for sending, ever: once
	// per live event and mask, however many watchers share the mask, plus
	// once per item of a replay or an initial list.
	ProjectionEncodes int64
	// ProjectionCompares counts earlier states projected to find whether a
	// MODIFIED changed anything a mask keeps, ever.
	ProjectionCompares int64
}

// Stats returns the watchers' figures; it visits every watcher.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	ws := make([]*Watcher, 0, len(h.watchers))
	for w := range h.watchers {
		ws = append(ws, w)
	}
	projections := len(h.projections)
	h.mu.Unlock()
	st := Stats{
		Watchers: len(ws), Coalesced: h.coalesced.Load(), Projections: projections,
		ProjectionEncodes: h.pstats.encodes.Load(), ProjectionCompares: h.pstats.compared.Load(),
	}
	for _, w := range ws {
		w.mu.Lock()
		depth, oldest := w.q.len(), w.q.oldest()
		w.mu.Unlock()
		st.MaxQueueDepth = max(st.MaxQueueDepth, depth)
		if !oldest.IsZero() && (st.OldestUndelivered.IsZero() || oldest.Before(st.OldestUndelivered)) {
			st.OldestUndelivered = oldest
		}
	}
	return st
}

// Close ends every watcher with err (ErrClosed when nil) and refuses new
// ones. It is idempotent.
func (h *Hub) Close(err error) {
	if err == nil {
		err = ErrClosed
	}
	h.mu.Lock()
	if h.closed != nil {
		h.mu.Unlock()
		return
	}
	h.closed = err
	ws := make([]*Watcher, 0, len(h.watchers))
	for w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	h.cancel()
	for _, w := range ws {
		w.end(err)
	}
}
