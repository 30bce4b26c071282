package indexer

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// This file is the indexer's side of the durable state (internal/state): a
// writer reads the cache's changes and consistent checkpoints of it, and a
// restart restores what was written.

// Changes are the events a writer of the durable state has not written
// yet, and where the history window stood when they were read.
type Changes struct {
	// Events are the history's events after the sequence number asked
	// for, oldest first.
	Events []Event
	// At is the cache's position once the writer has Events: the cache's
	// own (bookmarks included) when Events reach it, else the last event's.
	At Position
	// CaughtUp is set when Events reach the cache's current position.
	CaughtUp bool
	// Floor and FloorSeq are the history window's start: a resume from an
	// RV at or above Floor is answered; events at or below FloorSeq have
	// left the window.
	Floor, FloorSeq uint64
}

// ChangesAfter returns up to about limit events after seq, or ErrTooOld
// when the history no longer holds them, or ErrNotSynced. A chunk never
// ends inside a group of events that share a resourceVersion, nor inside a
// relist's diff: a state written up to the middle of a diff would claim a
// resourceVersion whose deletes it lacks (they come last, at the list's
// resourceVersion), and a watch resumed from there would never bring them.
func (ix *Indexer) ChangesAfter(seq uint64, limit int) (Changes, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ix.synced {
		return Changes{}, ErrNotSynced
	}
	evs, ok := ix.history.after(seq, limit)
	if !ok {
		return Changes{}, fmt.Errorf("%w: the events after seq %d have left the history window (floor %d)", ErrTooOld, seq, ix.history.floor)
	}
	if n := len(evs); n > 0 && evs[n-1].Relist {
		// Through the end of the relist's diff: its events are one batch.
		i := sort.Search(ix.history.n, func(i int) bool { return ix.history.at(i).Seq > evs[n-1].Seq })
		for ; i < ix.history.n && ix.history.at(i).Relist; i++ {
			evs = append(evs, *ix.history.at(i))
		}
	}
	c := Changes{Events: evs, Floor: ix.history.floor, FloorSeq: ix.history.floorSeq}
	if len(evs) == 0 || evs[len(evs)-1].Seq == ix.history.lastSeq() {
		c.CaughtUp, c.At = true, Position{ResourceVersion: ix.rvString, Seq: ix.seq}
	} else {
		last := evs[len(evs)-1]
		c.At = Position{ResourceVersion: last.ResourceVersion, Seq: last.Seq}
	}
	return c, nil
}

// Checkpoint is a consistent copy of the whole cache, as a durable state
// is written from scratch: the objects at the start of the history window
// and the window's events, which replayed on them give the current
// objects.
type Checkpoint struct {
	// Base holds the objects as they were at Floor.
	Base View
	// Events are the history's events, oldest first.
	Events []Event
	// At is the cache's position; Floor and FloorSeq the window's start.
	At              Position
	Floor, FloorSeq uint64
}

// TakeBase removes up to limit objects from the checkpoint's Base, the
// first in key order, and returns them: a writer that writes each page and
// takes the next lets go of the objects as it goes. The checkpoint's
// objects are the cache's as they were when it was taken; the cache may
// have replaced them since (compressed them, or applied changes), and
// until the writer lets go they stay on the heap beside their successors.
// At 200,000 pods with managedFields that is gigabytes for the length of a
// state file's first write. Base is the checkpoint's own, so taking from
// it changes nothing the cache or a reader sees.
func (c Checkpoint) TakeBase(limit int) []*object.Object {
	if c.Base.t == nil {
		return nil
	}
	objs := make([]*object.Object, 0, min(limit, c.Base.t.Len()))
	for len(objs) < limit {
		e, ok := c.Base.t.DeleteMin()
		if !ok {
			break
		}
		objs = append(objs, e.o)
	}
	return objs
}

// Checkpoint returns the cache as it is now, or ErrNotSynced. The objects
// at the window's start are rebuilt outside the lock (the current ones
// with every event of the window undone), so it never holds up Apply.
func (ix *Indexer) Checkpoint() (Checkpoint, error) {
	ix.mu.RLock()
	if !ix.synced {
		ix.mu.RUnlock()
		return Checkpoint{}, ErrNotSynced
	}
	evs, _ := ix.history.after(ix.history.floorSeq, ix.history.n)
	c := Checkpoint{
		Events: evs,
		At:     Position{ResourceVersion: ix.rvString, Seq: ix.seq},
		Floor:  ix.history.floor, FloorSeq: ix.history.floorSeq,
	}
	t := ix.cloneLocked()
	ix.mu.RUnlock()
	if err := undo(t, evs); err != nil {
		return Checkpoint{}, err
	}
	c.Base = View{t: t, ResourceVersion: fmt.Sprint(c.Floor)}
	return c, nil
}

// undo reverts events, newest first, on a private tree.
func undo(t *tree, events []Event) error {
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		switch ev.Type {
		case watch.Added:
			t.Delete(entry{key: ev.Object.Key})
		case watch.Modified, watch.Deleted:
			t.ReplaceOrInsert(entry{key: ev.Prev.Key, o: ev.Prev})
		default:
			return fmt.Errorf("indexer: unexpected %s event in history", ev.Type)
		}
	}
	return nil
}

// Restored is a cache read back from a durable state.
type Restored struct {
	// Objects are the objects at At, in any order.
	Objects []*object.Object
	// Events are the history's events, oldest first, each with its Prev
	// and its Seq.
	Events []Event
	// At is the position the state was written at; Floor and FloorSeq
	// the history window's start.
	At              Position
	Floor, FloorSeq uint64
}

// Restore makes the cache what r says and marks it synced: it serves r's
// objects and resumes watches from any resourceVersion at or after
// r.Floor. It must be called before anything is applied; it tells no
// listener (none has joined a cache that was not synced). Events beyond
// the history's capacity are dropped, oldest first.
func (ix *Indexer) Restore(r Restored) error {
	rv, err := parseRV(r.At.ResourceVersion)
	if err != nil {
		return err
	}
	last := r.FloorSeq
	for _, ev := range r.Events {
		if ev.Seq <= last || ev.RV < r.Floor || ev.RV > rv || ev.Seq > r.At.Seq {
			return fmt.Errorf("indexer: restored event seq %d at resourceVersion %d is out of order (floor %d at seq %d, position %d at seq %d)",
				ev.Seq, ev.RV, r.Floor, r.FloorSeq, rv, r.At.Seq)
		}
		last = ev.Seq
	}
	ix.dispatching.Lock()
	defer ix.dispatching.Unlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.synced || ix.objects.Len() > 0 {
		return fmt.Errorf("indexer: restore into a cache that already holds objects")
	}
	objs := slices.Clone(r.Objects)
	slices.SortFunc(objs, func(a, b *object.Object) int { return strings.Compare(a.Key, b.Key) })
	for i, o := range objs {
		if i > 0 && objs[i-1].Key == o.Key {
			return fmt.Errorf("indexer: restored object %s twice", o.Key)
		}
		ix.put(nil, o)
	}
	ix.history.reset(r.Floor, r.FloorSeq)
	for _, ev := range r.Events {
		ix.history.append(ev)
	}
	ix.rv, ix.rvString, ix.seq = rv, r.At.ResourceVersion, r.At.Seq
	ix.synced = true
	close(ix.syncedCh)
	close(ix.advanced)
	ix.advanced = make(chan struct{})
	return nil
}
