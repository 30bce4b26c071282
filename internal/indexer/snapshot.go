package indexer

import (
	"fmt"
	"math"
	"sync"

	"github.com/informerd/informerd/internal/object"
)

// maxViews bounds the views kept for the continue pages of Lists: each one
// pins the tree nodes the cache has replaced since it was taken.
const maxViews = 16

// views keeps the most recent views the pages of Lists were read from, so
// that a continue page finds its List's view in O(1) instead of rebuilding
// it. Its fields are guarded by mu; the Indexer's read lock is held too
// when the live tree is cloned, so that no write runs meanwhile.
type views struct {
	mu   sync.Mutex
	kept []View // oldest first
	// live is a clone of the live tree at seq liveSeq, shared by every List
	// until the cache changes.
	live    *tree
	liveSeq uint64
	liveOK  bool
}

// View returns the cache's current objects, immutable, in O(1).
func (ix *Indexer) View() View {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.viewLocked()
}

// viewLocked clones the live tree, or reuses the clone taken since the last
// change. The caller holds ix.mu, at least for reading.
func (ix *Indexer) viewLocked() View {
	vs := &ix.views
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if !vs.liveOK || vs.liveSeq != ix.seq {
		vs.live, vs.liveSeq, vs.liveOK = ix.objects.Clone(), ix.seq, true
	}
	v := View{t: vs.live, ResourceVersion: ix.rvString}
	vs.keepLocked(v)
	return v
}

// cloneLocked returns a private clone of the live tree, to modify. The
// caller holds ix.mu, at least for reading.
func (ix *Indexer) cloneLocked() *tree {
	ix.views.mu.Lock()
	defer ix.views.mu.Unlock()
	return ix.objects.Clone()
}

func (vs *views) keepLocked(v View) {
	if n := len(vs.kept); n > 0 && vs.kept[n-1].ResourceVersion == v.ResourceVersion {
		vs.kept[n-1] = v
		return
	}
	if len(vs.kept) == maxViews {
		vs.kept = append(vs.kept[:0], vs.kept[1:]...)
	}
	vs.kept = append(vs.kept, v)
}

func (vs *views) find(rv string) (View, bool) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for i := len(vs.kept) - 1; i >= 0; i-- {
		if vs.kept[i].ResourceVersion == rv {
			return vs.kept[i], true
		}
	}
	return View{}, false
}

// expire drops the views older than the history window (floor), which no
// continue page may read any more. The caller holds ix.mu for writing.
func (vs *views) expire(floor uint64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	i := 0
	for i < len(vs.kept) {
		if rv, err := parseRV(vs.kept[i].ResourceVersion); err == nil && rv >= floor {
			break
		}
		i++
	}
	if i > 0 {
		vs.kept = append(vs.kept[:0], vs.kept[i:]...)
	}
}

// ViewAt returns the objects as they were at resourceVersion rv, for the
// pages of one List: the view that List's first page read when it is still
// kept, or else the current tree with every later event undone from
// history (O(events since rv · log n)). rv older than the history window
// yields ErrTooOld; rv ahead of the cache yields the current view.
func (ix *Indexer) ViewAt(rv string) (View, error) {
	n, err := parseRV(rv)
	if err != nil {
		return View{}, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if n >= ix.rv {
		return ix.viewLocked(), nil
	}
	if n < ix.history.floor {
		return View{}, fmt.Errorf("%w: %d is before the oldest kept, %d", ErrTooOld, n, ix.history.floor)
	}
	if v, ok := ix.views.find(rv); ok {
		return v, nil
	}
	later, err := ix.sinceLocked(n)
	if err != nil {
		return View{}, err
	}
	t := ix.cloneLocked()
	for i := len(later) - 1; i >= 0; i-- {
		ev := later[i]
		switch ev.Type {
		case Added:
			t.Delete(entry{key: ev.Object.Key})
		case Modified, Deleted:
			t.ReplaceOrInsert(entry{key: ev.Prev.Key, o: ev.Prev})
		default:
			return View{}, fmt.Errorf("indexer: unexpected %s event in history", ev.Type)
		}
	}
	v := View{t: t, ResourceVersion: rv}
	ix.views.mu.Lock()
	ix.views.keepLocked(v)
	ix.views.mu.Unlock()
	return v, nil
}

// ListAt returns the objects for which match returns true as they were at
// resourceVersion rv (see ViewAt).
func (ix *Indexer) ListAt(rv string, match func(*object.Object) bool) (Snapshot, error) {
	v, err := ix.ViewAt(rv)
	if err != nil {
		return Snapshot{}, err
	}
	objs, _ := v.Page("", "", math.MaxInt, match)
	return Snapshot{Objects: objs, ResourceVersion: v.ResourceVersion}, nil
}
