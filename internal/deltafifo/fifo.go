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
	// apply is Run's: set while it runs, it lets a producer apply its own
	// change (see Run).
	apply func([]Delta)
	// applying is set while an entry is being applied, by Run's consumer
	// or by a producer applying its own; no other is popped meanwhile.
	applying bool
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
		f.mu.Unlock()
		return ErrClosed
	}
	it.delta.Received = time.Now()
	if apply := f.apply; apply != nil && it.replace == nil && !f.applying && f.head == len(f.items) {
		// Nothing is ahead of this change and nothing is being applied:
		// apply it here, where a hand-off would wake the consumer for one
		// delta.
		f.applying = true
		f.mu.Unlock()
		apply([]Delta{it.delta})
		f.mu.Lock()
		f.applying = false
		if f.head < len(f.items) {
			f.wakeLocked() // another producer queued meanwhile
		}
		f.mu.Unlock()
		return nil
	}
	f.items = append(f.items, it)
	f.wakeLocked()
	f.mu.Unlock()
	return nil
}

// wakeLocked wakes the consumer waiting for an entry.
func (f *FIFO) wakeLocked() {
	close(f.nonEmpty)
	f.nonEmpty = make(chan struct{})
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

// Run applies the queue's entries with apply, in order, one at a time,
// until ctx is done or the queue closes, and returns why. While it runs, a
// change pushed when the queue is empty and nothing is being applied is
// applied by the producer itself, on its goroutine, before its Add,
// Update, Delete or Bookmark returns: at a steady trickle of changes every
// one is, and no goroutine is woken to apply it. A Replace is always left
// to Run, and so is every change queued behind an entry: while a relist is
// diffed and applied, the changes after it wait in the queue, up to its
// capacity, and the producer goes on reading.
//
// Only one of Run and Pop may be used, by one goroutine.
func (f *FIFO) Run(ctx context.Context, apply func([]Delta)) error {
	f.mu.Lock()
	f.apply = apply
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.apply = nil
		f.mu.Unlock()
	}()
	for {
		deltas, err := f.pop(ctx, true)
		if err != nil {
			return err
		}
		apply(deltas)
		f.mu.Lock()
		f.applying = false
		f.mu.Unlock()
	}
}

// Pop waits for the next entry and returns its deltas in the order to apply
// them: one for a plain entry, the diff for a Replace (its Bookmark marked
// Synced after the first one). It returns ctx's error or ErrClosed when it stops.
func (f *FIFO) Pop(ctx context.Context) ([]Delta, error) {
	return f.pop(ctx, false)
}

// pop is Pop; mark sets applying for the entry popped, which the caller
// clears once it is applied.
func (f *FIFO) pop(ctx context.Context, mark bool) ([]Delta, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, ErrClosed
		}
		if f.head < len(f.items) && !f.applying {
			f.applying = mark
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
