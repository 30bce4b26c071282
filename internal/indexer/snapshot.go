package indexer

import (
	"fmt"

	"github.com/informerd/informerd/internal/object"
)

// ListAt returns the objects for which match returns true as they were at
// resourceVersion rv: the current state with every later event undone from
// history. It lets the pages of one List come from one snapshot. rv older
// than the history window yields ErrTooOld; rv ahead of the cache yields the
// current state at the cache's RV.
func (ix *Indexer) ListAt(rv string, match func(*object.Object) bool) (Snapshot, error) {
	n, err := parseRV(rv)
	if err != nil {
		return Snapshot{}, err
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if n >= ix.rv {
		return ix.listLocked(match), nil
	}
	later, err := ix.sinceLocked(n)
	if err != nil {
		return Snapshot{}, err
	}
	state := make(map[string]*object.Object, len(ix.objects))
	for k, o := range ix.objects {
		state[k] = o
	}
	for i := len(later) - 1; i >= 0; i-- {
		ev := later[i]
		switch ev.Type {
		case Added:
			delete(state, ev.Object.Key)
		case Modified, Deleted:
			state[ev.Prev.Key] = ev.Prev
		default:
			return Snapshot{}, fmt.Errorf("indexer: unexpected %s event in history", ev.Type)
		}
	}
	out := make([]*object.Object, 0, len(state))
	for _, o := range state {
		if match == nil || match(o) {
			out = append(out, o)
		}
	}
	s := ix.snapshotLocked(out)
	s.ResourceVersion = rv
	return s, nil
}
