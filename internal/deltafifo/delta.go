// Package deltafifo is the queue between the reflector and the cache: in
// order, bounded (a full queue makes the producer wait), and keyed so that a
// relist (Replace) is diffed against what the cache holds and yields only the
// objects that were really added, changed or deleted.
//
// Despite its name (kept from the project's layout), it is not client-go's
// DeltaFIFO, which merges the deltas of one key and pops them per key. It
// behaves like client-go's RealFIFO, the shared informer's queue in
// client-go v0.37: one entry per change, popped in the order received. It differs from
// RealFIFO in four ways:
//   - it is bounded: Add waits while the queue is full, which slows the
//     reflector's read of the watch (client-go's queues grow without bound);
//   - a Replace is one entry, diffed against the cache when popped: objects
//     whose resourceVersion did not change yield nothing, where client-go
//     queues a Replaced delta for every listed object;
//   - at most one Replace is queued: a newer one drops the older and what
//     followed it;
//   - bookmarks are entries too (watch.Bookmark deltas), so the cache's
//     resourceVersion moves in order with the changes.
//
// Run, its consumer, also lets a producer apply its own change when the
// queue is empty and nothing is being applied: a queue is a hand-off
// between goroutines, and at a trickle of changes waking a goroutine for
// each one costs more than applying it.
//
// Deltas carry apimachinery's watch.EventType, the one event type informerd
// uses from the queue to the stream.
package deltafifo

import (
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// Delta is one change for the cache to apply.
type Delta struct {
	// Type is watch.Added, Modified or Deleted for a change to Object, or
	// watch.Bookmark for a delta that only moves the resourceVersion: the
	// cache has seen every change up to it. informerd's core uses
	// apimachinery's event types from the queue to the stream; only the
	// serving layers map them to their wire.
	Type watch.EventType
	// Synced is set on the Bookmark that ends the first full list: the
	// cache is complete from there on.
	Synced bool
	// Object is the new state, or for Deleted the last state known.
	Object *object.Object
	// ResourceVersion is the RV this delta brings the cache to: the
	// object's for Added and Updated, the event's for Deleted (which is
	// the list RV when a relist found the object gone), the bookmark's or
	// list's otherwise.
	ResourceVersion string
	// Relist is set on deltas a Replace produced.
	Relist bool
	// Repair is set on a Modified delta a Replace produced for an object
	// the cache holds at the same resourceVersion but whose stored bytes
	// are damaged (Damaged): the cache replaces them with Object's, which
	// is no change, and tells no one.
	Repair bool
	// Received is when the producer queued the change: the start of the
	// cache's ingest lag.
	Received time.Time
}

// Known is the consumer's current view, which a Replace is diffed against.
// It is called only from the goroutine that calls Pop or Run, after every
// delta before the Replace has been applied.
type Known interface {
	// Keys returns every key the cache holds.
	Keys() []string
	// Get returns the cached object for key.
	Get(key string) (*object.Object, bool)
}

// Damaged is a Known that also knows which of its objects have damaged
// stored bytes (object.ErrDamaged): a relist replaces those even at an
// unchanged resourceVersion.
type Damaged interface {
	Damaged(o *object.Object) bool
}
