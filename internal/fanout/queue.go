package fanout

import (
	"container/list"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// queue holds a watcher's undelivered items. It is guarded by the
// watcher's lock.
type queue interface {
	// push adds it; false when the queue is full and it was not added.
	push(it Item, sameGroup bool) bool
	// popAll removes and returns every item, oldest first.
	popAll() []Item
	len() int
	// oldest is when the oldest pending change entered the cache (zero if
	// none is pending or it carries no time).
	oldest() time.Time
}

// fifo is a bounded queue. A group of events sharing one resourceVersion (a
// relist's deletes) is never split: it may overrun the bound, so that the
// watcher lags only at a group boundary and replays exactly from there.
type fifo struct {
	items []Item
	limit int
}

func (q *fifo) push(it Item, sameGroup bool) bool {
	if len(q.items) >= q.limit && !sameGroup {
		return false
	}
	q.items = append(q.items, it)
	return true
}

func (q *fifo) popAll() []Item {
	out := q.items
	q.items = nil
	return out
}

func (q *fifo) len() int { return len(q.items) }

func (q *fifo) oldest() time.Time {
	if len(q.items) == 0 {
		return time.Time{}
	}
	return q.items[0].Applied
}

// coalescing keeps at most the latest change per object (two when an object
// was deleted and created again), in resourceVersion order: an item that
// absorbs a newer change moves to the back. Its size is bounded by the
// number of objects the watcher selects, so it never refuses an item.
type coalescing struct {
	order  *list.List               // of Item
	latest map[string]*list.Element // object key -> its newest pending item
	merged *atomic.Int64            // changes absorbed, the hub's counter
}

func newCoalescing(merged *atomic.Int64) *coalescing {
	return &coalescing{order: list.New(), latest: map[string]*list.Element{}, merged: merged}
}

func (q *coalescing) push(it Item, _ bool) bool {
	if it.Object == nil {
		q.order.PushBack(it)
		return true
	}
	key := it.Object.Key
	e, ok := q.latest[key]
	if !ok {
		q.latest[key] = q.order.PushBack(it)
		return true
	}
	old := e.Value.(Item)
	q.merged.Add(1)
	switch {
	case old.Type == watch.Added && it.Type == watch.Deleted:
		// Never seen by the client: nothing to say.
		q.order.Remove(e)
		delete(q.latest, key)
		return true
	case old.Type == watch.Added:
		it.Type = watch.Added
	case old.Type == watch.Deleted && it.Type == watch.Added && old.Object.UID != it.Object.UID:
		// A new object under the same name: the delete stays.
		q.latest[key] = q.order.PushBack(it)
		return true
	case old.Type == watch.Deleted && it.Type == watch.Added:
		it.Type = watch.Modified
	}
	q.order.Remove(e)
	q.latest[key] = q.order.PushBack(it)
	return true
}

func (q *coalescing) popAll() []Item {
	out := make([]Item, 0, q.order.Len())
	for e := q.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(Item))
	}
	q.order.Init()
	clear(q.latest)
	return out
}

func (q *coalescing) len() int { return q.order.Len() }

// oldest: items move to the back when they absorb a change, so the front
// holds the longest-waiting one.
func (q *coalescing) oldest() time.Time {
	if e := q.order.Front(); e != nil {
		return e.Value.(Item).Applied
	}
	return time.Time{}
}
