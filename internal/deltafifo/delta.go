// Package deltafifo is the queue between the reflector and the cache: in
// order, bounded (a full queue makes the producer wait), and keyed so that a
// relist (Replace) is diffed against what the cache holds and yields only the
// objects that were really added, changed or deleted.
package deltafifo

import (
	"time"

	"github.com/informerd/informerd/internal/object"
)

// Type is the kind of a Delta.
type Type int

// Delta types.
const (
	Added Type = iota + 1
	Updated
	Deleted
	// Bookmark carries only a resourceVersion: the cache has seen every
	// change up to it.
	Bookmark
	// Synced marks the end of the first full list: the cache is complete.
	Synced
)

func (t Type) String() string {
	switch t {
	case Added:
		return "Added"
	case Updated:
		return "Updated"
	case Deleted:
		return "Deleted"
	case Bookmark:
		return "Bookmark"
	case Synced:
		return "Synced"
	}
	return "Unknown"
}

// Delta is one change for the cache to apply.
type Delta struct {
	Type Type
	// Object is the new state, or for Deleted the last state known.
	Object *object.Object
	// ResourceVersion is the RV this delta brings the cache to: the
	// object's for Added and Updated, the event's for Deleted (which is
	// the list RV when a relist found the object gone), the bookmark's or
	// list's otherwise.
	ResourceVersion string
	// Relist is set on deltas a Replace produced.
	Relist bool
	// Received is when the producer queued the change: the start of the
	// cache's ingest lag.
	Received time.Time
}

// Known is the consumer's current view, which a Replace is diffed against.
// It is called only from the goroutine that calls Pop, after the deltas
// popped before have been applied.
type Known interface {
	// Keys returns every key the cache holds.
	Keys() []string
	// Get returns the cached object for key.
	Get(key string) (*object.Object, bool)
}
