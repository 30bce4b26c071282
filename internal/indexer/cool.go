package indexer

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// This file is the indexer's side of compression: cold copies of objects
// replace the hot ones in the store (Cool), events always carry hot
// objects (hot), and objects whose stored bytes were found damaged are
// remembered until a relist replaces them (damage).

// A Cooler makes the cold copies of a resource's objects; object.Codec is
// one. Cool calls it outside the indexer's lock.
type Cooler interface {
	// Compress returns a cold copy of o, or an error (o damaged).
	Compress(o *object.Object) (*object.Object, error)
	// Stale reports whether o, cold, should be compressed again.
	Stale(o *object.Object) bool
}

// CoolStep is what one Cool did.
type CoolStep struct {
	// Scanned counts the objects visited; Cooled the hot ones replaced by
	// cold copies; Recompressed the stale cold ones replaced by copies
	// with the current dictionary; Stale the stale ones seen, replaced or
	// not; Failed those that could not be compressed (damaged).
	Scanned, Cooled, Recompressed, Stale, Failed int
	// Wrapped: the step reached the last key; the next one starts again
	// from the first.
	Wrapped bool
}

// scanPerCandidate bounds the objects a step visits per object it may
// compress, so that a step over a cache of hot recent objects is short.
const scanPerCandidate = 8

// Cool replaces up to limit objects of the store by cold copies that c
// makes: hot objects that no event of the history holds any more (their
// resourceVersion is at or below the history's floor: changed recently,
// an object stays hot, and the history already holds its bytes), and cold
// ones c says are stale. It visits the keys after where the previous step
// ended. The copies are made outside the lock; each replaces its object
// under the write lock only if the store still holds that object, which
// no event, view or reader sees as a change: the JSON is the same.
// Objects are never modified: a view or event holding the hot object keeps
// it. Cool is called by one goroutine at a time.
func (ix *Indexer) Cool(c Cooler, limit int) CoolStep {
	var step CoolStep
	cands := ix.coolCandidates(c, limit, &step)
	type swap struct{ old, cold *object.Object }
	swaps := make([]swap, 0, len(cands))
	for _, o := range cands {
		cold, err := c.Compress(o)
		if err != nil {
			step.Failed++
			continue
		}
		swaps = append(swaps, swap{o, cold})
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	changed := false
	for _, s := range swaps {
		if cur, ok := ix.getLocked(s.old.Key); !ok || cur != s.old {
			continue // changed or deleted meanwhile
		}
		ix.replaceLocked(s.old, s.cold)
		changed = true
		if s.old.Cold() {
			step.Recompressed++
		} else {
			step.Cooled++
		}
	}
	if changed {
		ix.version++
		ix.views.expire(ix.history.floor, ix.version)
	}
	ix.damage.purge(func(o *object.Object) bool {
		cur, ok := ix.getLocked(o.Key)
		return ok && cur == o
	})
	return step
}

// coolCandidates visits the keys after ix.coolAfter and returns the
// objects to compress.
func (ix *Indexer) coolCandidates(c Cooler, limit int, step *CoolStep) []*object.Object {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ix.synced || limit <= 0 {
		step.Wrapped = true
		return nil
	}
	var cands []*object.Object
	floor, after := ix.history.floor, ix.coolAfter
	step.Wrapped = true
	ix.objects.AscendGreaterOrEqual(entry{key: after}, func(e entry) bool {
		if e.key == after && after != "" {
			return true
		}
		if len(cands) == limit || step.Scanned == limit*scanPerCandidate {
			step.Wrapped = false
			return false
		}
		step.Scanned++
		after = e.key
		switch o := e.o; {
		case o.Cold():
			if c.Stale(o) {
				step.Stale++
				cands = append(cands, o)
			}
		case o.RV <= floor:
			cands = append(cands, o)
		}
		return true
	})
	if step.Wrapped {
		after = ""
	}
	ix.coolAfter = after // only Cool, one goroutine at a time, reads it
	return cands
}

// replaceLocked puts cold, a cold copy of old, in old's place in the store
// and its indexes. The caller holds ix.mu for writing.
func (ix *Indexer) replaceLocked(old, cold *object.Object) {
	ix.objects.ReplaceOrInsert(entry{key: cold.Key, o: cold})
	for i, vs := range cold.Values {
		for _, v := range vs {
			if set := ix.indices[i][v]; set != nil {
				set[cold.Key] = cold
			}
		}
	}
	ix.count(old, -1)
	ix.count(cold, 1)
}

// Sample returns up to n of the cached objects, spread evenly over the
// keys: what a compression dictionary is trained on.
func (ix *Indexer) Sample(n int) []*object.Object {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	total := ix.objects.Len()
	if n <= 0 || total == 0 {
		return nil
	}
	every := max(1, total/n)
	out := make([]*object.Object, 0, min(n, total))
	i := 0
	ix.objects.Ascend(func(e entry) bool {
		if i%every == 0 {
			out = append(out, e.o)
		}
		i++
		return len(out) < n
	})
	return out
}

// hot returns deltas with each cold object replaced by a hot copy, so that
// every event carries a hot object: the fan-out sends an event's object to
// every watcher, and must not decompress it for each. Only a relist's
// deletes (and deletes of objects recreated while unwatched) carry the
// cached object, which may be cold; a damaged one stays as it is, and its
// readers get the error.
func hot(deltas []deltafifo.Delta) []deltafifo.Delta {
	cloned := false
	for i, d := range deltas {
		if d.Type == watch.Bookmark || d.Object == nil || !d.Object.Cold() {
			continue
		}
		h, err := d.Object.Hot()
		if err != nil {
			continue
		}
		if !cloned {
			deltas, cloned = slices.Clone(deltas), true
		}
		deltas[i].Object = h
	}
	return deltas
}

// repairLocked replaces the cached object with o when the cache holds the
// same object (uid) at the same resourceVersion: a relist's copy of an
// object whose stored bytes were damaged. It reports whether it did; if
// not, the delta is applied as the change it then is. The damaged object
// goes from the kept views too (no event holds it: it replaced a hot one
// no event had changed since): a List's continue page would otherwise
// still find it, and each read ask for another relist, which could not
// replace it.
func (ix *Indexer) repairLocked(o *object.Object) bool {
	cur, ok := ix.getLocked(o.Key)
	if !ok || cur.UID != o.UID || cur.ResourceVersion != o.ResourceVersion {
		return false
	}
	ix.put(cur, o)
	vs := &ix.views
	vs.mu.Lock()
	vs.kept = slices.DeleteFunc(vs.kept, func(v View) bool {
		k, ok := v.Get(cur.Key)
		return ok && k == cur
	})
	vs.mu.Unlock()
	return true
}

// maxDamaged bounds the damaged objects remembered at once.
const maxDamaged = 4096

// damage remembers the objects whose stored bytes a reader found damaged,
// until they leave the store: a relist replaces them even at an unchanged
// resourceVersion (deltafifo.Damaged). Its own lock, never held while
// taking another, lets a reader that holds the indexer's read lock report
// damage.
type damage struct {
	mu   sync.Mutex
	objs map[*object.Object]struct{}
}

// MarkDamaged records that o's stored bytes are damaged (object.ErrDamaged):
// the next relist replaces it. Safe to call from any goroutine, with or
// without the indexer's locks.
func (ix *Indexer) MarkDamaged(o *object.Object) {
	d := &ix.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.objs == nil {
		d.objs = map[*object.Object]struct{}{}
	}
	if len(d.objs) < maxDamaged {
		d.objs[o] = struct{}{}
	}
}

// Damaged implements deltafifo.Damaged: whether o was found damaged.
func (ix *Indexer) Damaged(o *object.Object) bool {
	d := &ix.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.objs[o]
	return ok
}

var _ deltafifo.Damaged = (*Indexer)(nil)

// forget drops o, which leaves the store.
func (d *damage) forget(o *object.Object) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.objs, o)
}

// purge drops the objects for which held is false (no longer in the
// store: a view's or the history's, found damaged).
func (d *damage) purge(held func(*object.Object) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for o := range d.objs {
		if !held(o) {
			delete(d.objs, o)
		}
	}
}
