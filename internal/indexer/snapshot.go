package indexer

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/informerd/informerd/internal/object"
)

// maxViews bounds the views kept for the continue pages of Lists: each one
// pins the tree nodes the cache has replaced since it was taken.
const maxViews = 16

// views keeps the views the pages of Lists with more to come were read
// from, so that a continue page finds its List's view in O(1) instead of
// rebuilding it. Its fields are guarded by mu; the Indexer's read lock is
// held too when the live tree is cloned, so that no write runs meanwhile.
type views struct {
	mu   sync.Mutex
	kept []View
	// live is a clone of the live tree at version liveVersion, shared by
	// every List until the cache changes; nil once it has.
	live        *tree
	liveVersion uint64
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
	if vs.live == nil || vs.liveVersion != ix.version {
		vs.live, vs.liveVersion = ix.objects.Clone(), ix.version
	}
	return View{t: vs.live, ResourceVersion: ix.rvString}
}

// cloneLocked returns a private clone of the live tree, to modify. The
// caller holds ix.mu, at least for reading.
func (ix *Indexer) cloneLocked() *tree {
	ix.views.mu.Lock()
	defer ix.views.mu.Unlock()
	return ix.objects.Clone()
}

// Keep keeps v for the continue pages of the List that read its first page
// from it: a later ViewAt of its resourceVersion returns it in O(1). At most
// the 16 most recent views are kept, and none older than the history.
func (ix *Indexer) Keep(v View) {
	vs := &ix.views
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.keepLocked(v)
}

func (vs *views) keepLocked(v View) {
	if i := slices.IndexFunc(vs.kept, func(k View) bool { return k.ResourceVersion == v.ResourceVersion }); i >= 0 {
		vs.kept = slices.Delete(vs.kept, i, i+1)
	}
	if len(vs.kept) == maxViews {
		vs.kept = slices.Delete(vs.kept, 0, 1)
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
// continue page may read any more, and the live clone once the cache has
// changed since it (it would pin replaced objects until the next List).
// The caller holds ix.mu for writing.
func (vs *views) expire(floor, version uint64) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.kept = slices.DeleteFunc(vs.kept, func(v View) bool {
		rv, err := parseRV(v.ResourceVersion)
		return err != nil || rv < floor
	})
	if vs.liveVersion != version {
		vs.live = nil
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
	v, t, later, err := ix.viewAtLocked(rv, n)
	if err != nil || t == nil {
		return v, err
	}
	// The clone is private: the later events are undone on it outside the
	// lock, so that a rebuild never holds up Apply.
	if err := undo(t, later); err != nil {
		return View{}, err
	}
	v = View{t: t, ResourceVersion: rv}
	ix.Keep(v)
	return v, nil
}

// viewAtLocked returns the view at rv when it is the current one or kept;
// otherwise a private clone of the live tree and the events to undo on it.
func (ix *Indexer) viewAtLocked(rv string, n uint64) (View, *tree, []Event, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if n >= ix.rv {
		return ix.viewLocked(), nil, nil, nil
	}
	if n < ix.history.floor {
		return View{}, nil, nil, fmt.Errorf("%w: %d is before the oldest kept, %d", ErrTooOld, n, ix.history.floor)
	}
	if v, ok := ix.views.find(rv); ok {
		return v, nil, nil, nil
	}
	later, err := ix.sinceLocked(n)
	if err != nil {
		return View{}, nil, nil, err
	}
	return View{}, ix.cloneLocked(), later, nil
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
