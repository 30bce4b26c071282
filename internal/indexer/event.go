package indexer

import (
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// Event is one change to the cache, with the object's state before and after
// so that a listener selecting by index value or label can tell whether the
// object entered, left or stayed in its selection.
type Event struct {
	// Type is watch.Added, Modified or Deleted, or watch.Bookmark for an
	// event that only moves the resourceVersion: bookmarks are sent to
	// listeners but not kept in history.
	Type watch.EventType
	// Object is the new state; for Deleted, the final state. Nil for Bookmark.
	Object *object.Object
	// Prev is the state before the change: nil for Added and Bookmark.
	Prev *object.Object
	// ResourceVersion is the RV the cache is at after this event; RV is it
	// as a number.
	ResourceVersion string
	RV              uint64
	// Seq numbers the events of a cache in the order they are dispatched
	// (bookmarks included); see Joined.
	Seq uint64
	// Received is when the reflector received the change from the API
	// server; Applied is when the cache applied it.
	Received, Applied time.Time
	// Relist is set when the event came from diffing a relist.
	Relist bool
}

// Listener receives every event applied after it was added, in order, from
// the goroutine that applies them, after the indexer's write lock is
// released: it may read the indexer, but must not block. A fan-out listener
// enqueues and returns.
type Listener interface {
	OnEvent(Event)
}
