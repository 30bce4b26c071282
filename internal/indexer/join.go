package indexer

import (
	"fmt"

	"github.com/informerd/informerd/internal/object"
)

// AddListener registers l for every event from now on, synced or not. A
// fan-out registers once and adds watchers with Join.
func (ix *Indexer) AddListener(l Listener) (cancel func()) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e := &listenerEntry{l: l}
	ix.listeners[e] = struct{}{}
	return func() {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		delete(ix.listeners, e)
	}
}

// Start says where a watcher joins the event stream.
type Start struct {
	// ResourceVersion: replay the events after it. Empty means "from now".
	ResourceVersion string
	// Snapshot: instead of replaying, take the objects for which Match
	// returns true at the current resourceVersion.
	Snapshot bool
	Match    func(*object.Object) bool
}

// Join calls fn with the events after start.ResourceVersion (or the
// snapshot) and the cache's current resourceVersion, while no event can be
// applied: whatever fn registers with a listener sees exactly the events
// after that point. fn must not call back into the indexer.
func (ix *Indexer) Join(start Start, fn func(replay []Event, snapshot []*object.Object, at string)) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ix.synced {
		return ErrNotSynced
	}
	if start.Snapshot {
		fn(nil, ix.listLocked(start.Match).Objects, ix.rvString)
		return nil
	}
	var replay []Event
	if start.ResourceVersion != "" {
		n, err := parseRV(start.ResourceVersion)
		if err != nil {
			return err
		}
		if n > ix.rv {
			return fmt.Errorf("%w: %d > %d", ErrAhead, n, ix.rv)
		}
		if replay, err = ix.sinceLocked(n); err != nil {
			return err
		}
	}
	fn(replay, nil, ix.rvString)
	return nil
}
