package indexer

import (
	"fmt"
	"math"
	"slices"

	"github.com/informerd/informerd/internal/object"
)

// AddListener registers l for every event applied from now on, synced or
// not. A fan-out registers once and adds watchers with Join. After cancel
// returns, a dispatch already in flight may still call l once more.
func (ix *Indexer) AddListener(l Listener) (cancel func()) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.addListenerLocked(l)
}

// addListenerLocked adds l to a new slice: a dispatch in flight keeps the
// slice it took, so it never sees l.
func (ix *Indexer) addListenerLocked(l Listener) (cancel func()) {
	ix.listeners = append(slices.Clip(ix.listeners), l)
	return func() {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		if i := slices.Index(ix.listeners, l); i >= 0 {
			ix.listeners = slices.Delete(slices.Clone(ix.listeners), i, i+1)
		}
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
	// NoReplay: do not copy the events after ResourceVersion; the joiner
	// reads them with ReplayAfter from Position.Seq on.
	NoReplay bool
}

// Position is a point in the cache's event stream.
type Position struct {
	// ResourceVersion is the cache's RV at that point.
	ResourceVersion string
	// Seq is the sequence number of the last event dispatched up to it.
	Seq uint64
}

// Joined is what a joiner starts from.
type Joined struct {
	// Replay holds the events after Start.ResourceVersion; Snapshot the
	// objects selected, with Start.Snapshot.
	Replay   []Event
	Snapshot []*object.Object
	// At is where the joiner is once it has Replay or Snapshot: a listener
	// skips the events with a Seq at or below At.Seq.
	At Position
	// From is where a NoReplay joiner starts reading history.
	From Position
}

// Join calls fn with what a joiner starts from, while no event can be
// applied: whatever fn registers with a listener sees every event after
// j.At, and skips those at or before it that a dispatch in flight brings.
// fn must not call back into the indexer.
func (ix *Indexer) Join(start Start, fn func(j Joined)) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ix.synced {
		return ErrNotSynced
	}
	at := Position{ResourceVersion: ix.rvString, Seq: ix.seq}
	if start.Snapshot {
		objs, _ := ix.viewLocked().Page("", "", math.MaxInt, start.Match)
		fn(Joined{Snapshot: objs, At: at, From: at})
		return nil
	}
	j := Joined{At: at, From: at}
	if start.ResourceVersion != "" {
		n, err := parseRV(start.ResourceVersion)
		if err != nil {
			return err
		}
		if n > ix.rv {
			return fmt.Errorf("%w: %d > %d", ErrAhead, n, ix.rv)
		}
		if start.NoReplay {
			seq, ok := ix.history.seqAt(n)
			if !ok {
				return fmt.Errorf("%w: %d is before the oldest kept, %d", ErrTooOld, n, ix.history.floor)
			}
			j.From = Position{ResourceVersion: start.ResourceVersion, Seq: seq}
		} else if j.Replay, err = ix.sinceLocked(n); err != nil {
			return err
		}
	}
	fn(j)
	return nil
}

// ReplayAfter calls fn with up to about limit events after from (a Seq),
// while no event can be applied, and whether they reach the cache's
// current position (at, then): a caught-up reader registered with a
// listener in fn sees every later event. A chunk never ends inside a group
// of events that share one resourceVersion, so that a client resuming from
// the last one it received misses nothing. It returns ErrTooOld when the
// history no longer holds the events after from.
func (ix *Indexer) ReplayAfter(from uint64, limit int, fn func(evs []Event, caughtUp bool, at Position)) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	evs, ok := ix.history.after(from, limit)
	if !ok {
		return fmt.Errorf("%w: the events after it have left the history window (floor %d)", ErrTooOld, ix.history.floor)
	}
	at := Position{ResourceVersion: ix.rvString, Seq: ix.seq}
	caughtUp := len(evs) == 0 || evs[len(evs)-1].Seq == ix.history.lastSeq()
	if caughtUp {
		fn(evs, true, at)
		return nil
	}
	last := evs[len(evs)-1]
	fn(evs, false, Position{ResourceVersion: last.ResourceVersion, Seq: last.Seq})
	return nil
}
