// Package fanout delivers a resource's cache events to many watchers. One Hub
// listens to the indexer; each event reaches only the watchers registered
// under the index values the object had before or after it (plus those that
// select everything), so dispatch cost follows the matching watchers, not
// all of them. Each watcher has a bounded queue; the producer never blocks
// on it: a watcher that falls behind is replayed from the cache's history,
// or, with coalescing, keeps only the latest change per object.
package fanout

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// Selection is what a watcher selects; every set part must match.
type Selection struct {
	// Namespace, when set, must equal the object's.
	Namespace string
	// Labels, when not nil and not empty, must match the object's labels.
	Labels labels.Selector
	// Index is the position of the index in object.Values, or -1; the
	// object must have one of Values in it.
	Index  int
	Values []string
	// Fields, when not nil, must return true: the rest of a field
	// selector that the parts above do not express.
	Fields func(*object.Object) bool
}

// Matches reports whether o is selected.
func (s *Selection) Matches(o *object.Object) bool {
	if o == nil {
		return false
	}
	if s.Namespace != "" && o.Namespace != s.Namespace {
		return false
	}
	if s.Labels != nil && !s.Labels.Empty() && !s.Labels.Matches(o.Labels) {
		return false
	}
	if s.Index >= 0 {
		if s.Index >= len(o.Values) {
			return false
		}
		if !slices.ContainsFunc(o.Values[s.Index], func(v string) bool { return slices.Contains(s.Values, v) }) {
			return false
		}
	}
	return s.Fields == nil || s.Fields(o)
}

// Item is one thing to send to a watcher.
type Item struct {
	// Type is watch.Added, Modified, Deleted or Bookmark, as the client
	// sees it: an object entering the selection is Added, one leaving it
	// Deleted.
	Type   watch.EventType
	Object *object.Object // nil for a bookmark
	// ResourceVersion is the event's (the cache's RV after it).
	ResourceVersion string
	// Applied is when the change entered the cache; zero for initial
	// objects and bookmarks.
	Applied time.Time
}

// translate turns a cache event into what this selection sees: an object
// entering the selection is ADDED, one leaving it DELETED.
func (s *Selection) translate(ev indexer.Event) (Item, bool) {
	was := ev.Prev != nil && s.Matches(ev.Prev)
	var is bool
	if ev.Type != watch.Deleted {
		is = s.Matches(ev.Object)
	}
	it := Item{Object: ev.Object, ResourceVersion: ev.ResourceVersion, Applied: ev.Applied}
	switch {
	case was && is:
		it.Type = watch.Modified
	case is:
		it.Type = watch.Added
	case was:
		it.Type = watch.Deleted
	default:
		return Item{}, false
	}
	return it, true
}
