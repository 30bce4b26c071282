package deltafifo

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/informerd/informerd/internal/object"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrClosed is returned by every method once the queue is closed.
var ErrClosed = errors.New("deltafifo: queue closed")

// item is one queued entry: a delta, or a whole relist waiting to be diffed.
type item struct {
	delta   Delta
	replace []*object.Object
}

// FIFO is a bounded, ordered queue of deltas. One producer (the reflector)
// and one consumer (the cache) may use it concurrently; Close may be called
// from anywhere. A producer blocks while the queue is full, which slows its
// read of the watch stream: backpressure to the API server instead of
// unbounded memory.
type FIFO struct {
	known    Known
	capacity int

	mu       sync.Mutex
	notFull  *sync.Cond
	items    []item
	head     int
	closed   bool
	nonEmpty chan struct{} // closed and replaced when an item arrives
	synced   bool          // first Replace queued
}

// New returns a queue holding at most capacity entries. A Replace counts as
// one entry (the reflector has already buffered its list), and at most one
// Replace is ever queued: a newer one drops the older and what followed it.
func New(known Known, capacity int) *FIFO {
	if capacity < 1 {
		capacity = 1
	}
	f := &FIFO{known: known, capacity: capacity, nonEmpty: make(chan struct{})}
	f.notFull = sync.NewCond(&f.mu)
	return f
}

// Add queues an added object.
func (f *FIFO) Add(o *object.Object) error {
	return f.push(item{delta: Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion}})
}

// Update queues a changed object.
func (f *FIFO) Update(o *object.Object) error {
	return f.push(item{delta: Delta{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion}})
}

// Delete queues a deleted object; o is its final state, and its
// resourceVersion is the deletion's.
func (f *FIFO) Delete(o *object.Object) error {
	return f.push(item{delta: Delta{Type: watch.Deleted, Object: o, ResourceVersion: o.ResourceVersion}})
}

// Bookmark queues a resourceVersion the cache has caught up to.
func (f *FIFO) Bookmark(rv string) error {
	return f.push(item{delta: Delta{Type: watch.Bookmark, ResourceVersion: rv}})
}

// Replace queues a full list at rv. When popped it is diffed against Known:
// only new, changed (by resourceVersion) and vanished objects become deltas.
func (f *FIFO) Replace(objs []*object.Object, rv string) error {
	if objs == nil {
		objs = []*object.Object{}
	}
	return f.push(item{delta: Delta{ResourceVersion: rv}, replace: objs})
}

func (f *FIFO) push(it item) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if it.replace != nil {
		// A newer full list supersedes a queued one and whatever came
		// after it, so the queue never holds two lists.
		for i := f.head; i < len(f.items); i++ {
			if f.items[i].replace != nil {
				clear(f.items[i:])
				f.items = f.items[:i]
				f.notFull.Broadcast()
				break
			}
		}
	}
	for !f.closed && len(f.items)-f.head >= f.capacity {
		f.notFull.Wait()
	}
	if f.closed {
		return ErrClosed
	}
	it.delta.Received = time.Now()
	f.items = append(f.items, it)
	close(f.nonEmpty)
	f.nonEmpty = make(chan struct{})
	return nil
}

// Close wakes every waiter; later calls return ErrClosed. It is idempotent.
func (f *FIFO) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.nonEmpty)
		f.notFull.Broadcast()
	}
}

// Pop waits for the next entry and returns its deltas in the order to apply
// them: one for a plain entry, the diff for a Replace (its Bookmark marked
// Synced after the first one). It returns ctx's error or ErrClosed when it stops.
func (f *FIFO) Pop(ctx context.Context) ([]Delta, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, ErrClosed
		}
		if f.head < len(f.items) {
			it := f.items[f.head]
			f.items[f.head] = item{}
			f.head++
			if f.head == len(f.items) {
				f.items, f.head = f.items[:0], 0
			} else if f.head > f.capacity {
				f.items, f.head = slices.Clip(f.items[f.head:]), 0
			}
			first := it.replace != nil && !f.synced
			if it.replace != nil {
				f.synced = true
			}
			f.notFull.Signal()
			f.mu.Unlock()
			if it.replace == nil {
				return []Delta{it.delta}, nil
			}
			return f.diff(it.replace, it.delta.ResourceVersion, it.delta.Received, first), nil
		}
		wait := f.nonEmpty
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		}
	}
}
