// Package indexer is informerd's watch cache for one resource: a store, its
// indexes, a history of events and the listeners it tells of each change.
//
// Despite its name (kept from the project's layout), it is more than
// client-go's cache.Indexer, a thread-safe map of decoded objects with index
// functions. It is closer to kube-apiserver's watch cache (the cacher):
//   - the store holds each object once as encoded bytes plus the metadata for
//     keys, selectors and indexes (object.Object), in a copy-on-write B-tree
//     whose immutable Views serve List pages from one snapshot;
//   - indexes may be multi-valued (a label, or a JSONPath yielding several
//     values);
//   - it has a resourceVersion, and a history window of events (bounded by
//     count and age) from which a watch resumes without a gap: Join and
//     ReplayAfter;
//   - listeners (the fan-out's Hub) are told of every change, with the
//     object's state before and after it, from the goroutine that applies
//     it, after the write lock is released.
//
// Apply is fed by the deltafifo; Join, ReplayAfter, Get, View, ViewAt,
// ByIndex and WaitFor serve the readers. Lock order: Indexer.dispatching →
// Indexer.mu → (listener and joiner locks: fanout's Hub.mu → Watcher.mu).
package indexer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// Errors a caller can branch on with errors.Is.
var (
	// ErrTooOld: the requested resourceVersion is older than the history
	// window; the client must list again.
	ErrTooOld = errors.New("indexer: resource version too old")
	// ErrUnknownIndex: no index by that name.
	ErrUnknownIndex = errors.New("indexer: unknown index")
	// ErrNotSynced: the cache has not completed its first list.
	ErrNotSynced = errors.New("indexer: cache not synced")
	// ErrAhead: the requested resourceVersion is newer than the cache (a
	// client failing over from a replica that is further along). Wait with
	// WaitFor, then subscribe.
	ErrAhead = errors.New("indexer: resource version ahead of the cache")
)

// Options bound the history window.
type Options struct {
	HistoryMaxEvents int
	HistoryMaxAge    time.Duration
	// Clock is for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// Indexer is the cache of one resource. Apply is called by one goroutine at
// a time, in the order of the changes (the pipeline's queue, FIFO.Run, sees
// to it: its consumer, or the producer applying its own change); every
// other method may be called concurrently.
// Listeners are told of each change after the write lock is released, so
// that dispatching to many watchers never holds up a Get, a List or a join.
type Indexer struct {
	names []string
	clock clock.PassiveClock

	mu       sync.RWMutex
	objects  *tree
	indices  []map[string]map[string]*object.Object // index -> value -> key -> object
	rv       uint64
	rvString string
	// seq numbers the events dispatched to listeners, bookmarks included:
	// a listener that joins at seq s has seen (or replayed) every event up
	// to s and must skip those a dispatch still in flight brings it.
	seq uint64
	// version counts every change to the objects, the first list's
	// included: a clone taken at one version is the live tree until the
	// next.
	version uint64
	bytes   int64
	// raw and stored add up the objects' JSON lengths and the bytes they
	// take (compressed when cold); cold counts the cold objects.
	raw, stored int64
	cold        int
	// coolAfter is where the next cooling step starts (cool.go).
	coolAfter string
	synced    bool
	syncedCh  chan struct{} // closed when synced becomes true
	history   *history
	listeners []Listener
	advanced  chan struct{} // closed and replaced whenever rv moves
	views     views

	// dispatching is held through each Apply, its dispatch included, so
	// that Applies and their dispatches never overlap: listeners see events
	// in order, and pending (guarded by it) is reused.
	dispatching sync.Mutex
	pending     []Event

	damage damage
}

var _ deltafifo.Known = (*Indexer)(nil)

// New returns an empty indexer whose objects carry values for indexNames, in
// that order (as object.Encoder.IndexNames returns them).
func New(indexNames []string, opts Options) *Indexer {
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	ix := &Indexer{
		names:    slices.Clone(indexNames),
		clock:    c,
		objects:  newTree(),
		indices:  make([]map[string]map[string]*object.Object, len(indexNames)),
		history:  newHistory(opts.HistoryMaxEvents, opts.HistoryMaxAge),
		advanced: make(chan struct{}),
		syncedCh: make(chan struct{}),
	}
	for i := range ix.indices {
		ix.indices[i] = map[string]map[string]*object.Object{}
	}
	return ix
}

// IndexNames returns the names of the indexes, "namespace" first.
func (ix *Indexer) IndexNames() []string { return slices.Clone(ix.names) }

// Apply applies deltas in order, records them in history, then tells the
// listeners, outside the write lock.
func (ix *Indexer) Apply(deltas []deltafifo.Delta) {
	ix.dispatching.Lock()
	defer ix.dispatching.Unlock()
	deltas = hot(deltas)
	ix.mu.Lock()
	evs, listeners := ix.applyLocked(deltas)
	ix.mu.Unlock()
	for _, ev := range evs {
		for _, l := range listeners {
			l.OnEvent(ev)
		}
	}
	clear(evs) // keep the buffer, not the objects
	if cap(evs) > maxPending {
		ix.pending = nil // a relist's large batch: do not keep its buffer
	}
}

// BetweenBatches calls fn while no Apply is dispatching, and reports
// whether it did: it does not wait for one that is. Every event of a
// batch, so every event of a group sharing one resourceVersion, has then
// been told to the listeners, or none has. fn must not call Apply.
func (ix *Indexer) BetweenBatches(fn func()) bool {
	if !ix.dispatching.TryLock() {
		return false
	}
	defer ix.dispatching.Unlock()
	fn()
	return true
}

// maxPending bounds the event buffer Apply keeps between calls.
const maxPending = 1024

// applyLocked applies deltas and returns the events to dispatch and the
// listeners registered at this point, which are the ones to tell.
func (ix *Indexer) applyLocked(deltas []deltafifo.Delta) ([]Event, []Listener) {
	now := ix.clock.Now()
	moved := false
	evs := ix.pending[:0]
	defer func() { ix.pending = evs }()
	for _, d := range deltas {
		rv, _ := object.ParseRV(d.ResourceVersion)
		ev := Event{ResourceVersion: d.ResourceVersion, RV: rv, Received: d.Received, Applied: now, Relist: d.Relist}
		if d.Repair && ix.repairLocked(d.Object) {
			continue
		}
		switch d.Type {
		case watch.Added, watch.Modified:
			prev, ok := ix.getLocked(d.Object.Key)
			ev.Type, ev.Object = watch.Added, d.Object
			if ok {
				ev.Type, ev.Prev = watch.Modified, prev
			}
			ix.put(prev, d.Object)
		case watch.Deleted:
			prev, ok := ix.getLocked(d.Object.Key)
			if !ok {
				// A delete of something never seen (a relist already
				// removed it): nothing changes, nothing to say.
				moved = ix.advance(rv, d.ResourceVersion) || moved
				continue
			}
			ev.Type, ev.Object, ev.Prev = watch.Deleted, d.Object, prev
			ix.remove(prev)
		case watch.Bookmark:
			ev.Type = watch.Bookmark
			if d.Synced && !ix.synced {
				// The first list is complete: the cache starts here, and
				// its history with it.
				ix.advance(rv, d.ResourceVersion)
				ix.synced = true
				close(ix.syncedCh)
				ix.history.reset(ix.rv, ix.seq)
				moved = true
				continue
			}
		}
		moved = ix.advance(rv, d.ResourceVersion) || moved
		if !ix.synced {
			// The first list is the starting state, not a change.
			continue
		}
		// Events take the cache's RV so history stays ordered even when a
		// relist's delete carries an RV older than a bookmark's.
		ix.seq++
		ev.RV, ev.ResourceVersion, ev.Seq = ix.rv, ix.rvString, ix.seq
		if ev.Type != watch.Bookmark {
			ix.history.append(ev)
		}
		evs = append(evs, ev)
	}
	ix.history.expire(now)
	ix.views.expire(ix.history.floor, ix.version)
	if moved {
		close(ix.advanced)
		ix.advanced = make(chan struct{})
	}
	return evs, ix.listeners
}

func (ix *Indexer) advance(rv uint64, s string) bool {
	if rv <= ix.rv {
		return false
	}
	ix.rv, ix.rvString = rv, s
	return true
}

func (ix *Indexer) getLocked(key string) (*object.Object, bool) {
	e, ok := ix.objects.Get(entry{key: key})
	return e.o, ok
}

func (ix *Indexer) put(prev, o *object.Object) {
	if prev != nil {
		ix.unindex(prev)
	}
	ix.objects.ReplaceOrInsert(entry{key: o.Key, o: o})
	ix.version++
	ix.count(o, 1)
	for i, vs := range o.Values {
		for _, v := range vs {
			set := ix.indices[i][v]
			if set == nil {
				set = map[string]*object.Object{}
				ix.indices[i][v] = set
			}
			set[o.Key] = o
		}
	}
}

func (ix *Indexer) remove(o *object.Object) {
	ix.objects.Delete(entry{key: o.Key})
	ix.version++
	ix.unindex(o)
}

// unindex forgets o's size and index values; its entry goes or is
// replaced by the caller.
func (ix *Indexer) unindex(o *object.Object) {
	ix.count(o, -1)
	ix.damage.forget(o)
	for i, vs := range o.Values {
		for _, v := range vs {
			set := ix.indices[i][v]
			delete(set, o.Key)
			if len(set) == 0 {
				delete(ix.indices[i], v)
			}
		}
	}
}

// count adds o's figures to the cache's (sign 1) or takes them away (-1).
func (ix *Indexer) count(o *object.Object, sign int) {
	ix.bytes += int64(sign * o.Size())
	ix.raw += int64(sign * o.Len())
	ix.stored += int64(sign * o.StoredLen())
	if o.Cold() {
		ix.cold += sign
	}
}

// Keys returns every cached key.
func (ix *Indexer) Keys() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	keys := make([]string, 0, ix.objects.Len())
	ix.objects.Ascend(func(e entry) bool {
		keys = append(keys, e.key)
		return true
	})
	return keys
}

// Get returns the cached object for key.
func (ix *Indexer) Get(key string) (*object.Object, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.getLocked(key)
}

// Snapshot is a consistent list: the matching objects sorted by key and the
// resourceVersion they are at.
type Snapshot struct {
	Objects         []*object.Object
	ResourceVersion string
}

// List returns the objects for which match returns true (all when nil). A
// List of one page or from one namespace is cheaper through View.
func (ix *Indexer) List(match func(*object.Object) bool) Snapshot {
	v := ix.View()
	objs, _ := v.Page("", "", math.MaxInt, match)
	return Snapshot{Objects: objs, ResourceVersion: v.ResourceVersion}
}

// ByIndex returns the objects that have any of values in the named index and
// for which match returns true (all when nil).
func (ix *Indexer) ByIndex(name string, values []string, match func(*object.Object) bool) (Snapshot, error) {
	i := slices.Index(ix.names, name)
	if i < 0 {
		return Snapshot{}, fmt.Errorf("%w %q (indexes: %v)", ErrUnknownIndex, name, ix.names)
	}
	ix.mu.RLock()
	var out []*object.Object
	var seen map[string]struct{} // with several values, an object may have more than one
	if len(values) > 1 {
		seen = map[string]struct{}{}
	}
	for _, v := range values {
		for k, o := range ix.indices[i][v] {
			if seen != nil {
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
			}
			if match == nil || match(o) {
				out = append(out, o)
			}
		}
	}
	rv := ix.rvString
	ix.mu.RUnlock()
	// Sorted outside the lock: only the index's few objects.
	slices.SortFunc(out, func(a, b *object.Object) int { return strings.Compare(a.Key, b.Key) })
	return Snapshot{Objects: out, ResourceVersion: rv}, nil
}

// sinceLocked returns the events after rv in order, or ErrTooOld when rv is
// older than the history window.
func (ix *Indexer) sinceLocked(rv uint64) ([]Event, error) {
	if !ix.synced {
		return nil, ErrNotSynced
	}
	evs, ok := ix.history.since(rv)
	if !ok {
		return nil, fmt.Errorf("%w: %d is before the oldest kept, %d", ErrTooOld, rv, ix.history.floor)
	}
	return evs, nil
}

// HasSynced returns a channel closed once the first list is complete.
func (ix *Indexer) HasSynced() <-chan struct{} { return ix.syncedCh }

// WaitFor blocks until the cache is synced and at or past rv, or ctx ends.
func (ix *Indexer) WaitFor(ctx context.Context, rv string) error {
	n, err := parseRV(rv)
	if err != nil {
		return err
	}
	for {
		ix.mu.RLock()
		done, ch := ix.synced && ix.rv >= n, ix.advanced
		ix.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for resource version %s: %w", rv, ctx.Err())
		case <-ch:
		}
	}
}

// Stats describes the cache at one moment.
type Stats struct {
	Objects         int
	Bytes           int64
	ResourceVersion string
	Synced          bool
	// HistoryEvents is how many events the history holds; HistoryFloor is
	// the oldest resourceVersion a watch can resume from.
	HistoryEvents int
	HistoryFloor  uint64
	// RawBytes adds up the objects' JSON, StoredBytes what it takes in
	// memory (compressed for the Cold objects); Bytes adds their other
	// fields to StoredBytes.
	RawBytes, StoredBytes int64
	Cold                  int
}

// Stats returns the cache's current figures.
func (ix *Indexer) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return Stats{
		Objects: ix.objects.Len(), Bytes: ix.bytes, ResourceVersion: ix.rvString, Synced: ix.synced,
		HistoryEvents: ix.history.n, HistoryFloor: ix.history.floor,
		RawBytes: ix.raw, StoredBytes: ix.stored, Cold: ix.cold,
	}
}

// ErrBadResourceVersion: a resourceVersion that is not an API server
// revision number.
var ErrBadResourceVersion = errors.New("indexer: invalid resource version")

func parseRV(rv string) (uint64, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want the decimal resourceVersion of an object or list", ErrBadResourceVersion, rv)
	}
	return n, nil
}
