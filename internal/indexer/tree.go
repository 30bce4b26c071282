package indexer

import (
	"strings"

	"github.com/google/btree"

	"github.com/informerd/informerd/internal/object"
)

// entry is one object in the ordered store: its key beside it, so that a
// lookup by key needs no probe object.
type entry struct {
	key string
	o   *object.Object
}

func entryLess(a, b entry) bool { return a.key < b.key }

// treeDegree is the B-tree's degree, as kube-apiserver's watch cache uses:
// nodes of up to 63 entries keep the tree shallow and a copy-on-write of
// one path small.
const treeDegree = 32

// tree holds the objects in key order. A clone is O(1) and shares every
// node until either side writes (copy-on-write), which makes a snapshot of
// the whole cache cost nothing at the time it is taken.
type tree = btree.BTreeG[entry]

func newTree() *tree { return btree.NewG(treeDegree, entryLess) }

// View is the cache's objects at one resourceVersion, in key order. It is
// immutable: it stays the same while the cache moves on, and any number of
// goroutines may read it at once.
type View struct {
	t *tree
	// ResourceVersion is the RV the view is at.
	ResourceVersion string
}

// Len returns how many objects the view holds.
func (v View) Len() int {
	if v.t == nil {
		return 0
	}
	return v.t.Len()
}

// Get returns the object with key, if the view holds it.
func (v View) Get(key string) (*object.Object, bool) {
	if v.t == nil {
		return nil, false
	}
	e, ok := v.t.Get(entry{key: key})
	return e.o, ok
}

// Page returns up to limit objects, in key order, with keys after after
// (all when empty) that start with prefix and for which match returns true
// (all when nil), and whether any other object after them would match. It
// visits only the objects it returns and those match rejects, each in
// O(log n): a page costs O(page · log n) when most objects match.
func (v View) Page(after, prefix string, limit int, match func(*object.Object) bool) (objs []*object.Object, more bool) {
	if v.t == nil {
		return nil, false
	}
	from := max(after, prefix)
	v.t.AscendGreaterOrEqual(entry{key: from}, func(e entry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if e.key == after || (match != nil && !match(e.o)) {
			return true
		}
		if len(objs) == limit {
			more = true
			return false
		}
		objs = append(objs, e.o)
		return true
	})
	return objs, more
}

// HasAfter reports whether an object with a key that starts with prefix
// comes after key: whether a page that ends at key, its limit reached, has
// more to scan (the API server's cache answers such a page with a continue
// token even when nothing after it matches).
func (v View) HasAfter(key, prefix string) bool {
	if v.t == nil {
		return false
	}
	found := false
	v.t.AscendGreaterOrEqual(entry{key: max(key, prefix)}, func(e entry) bool {
		if e.key == key {
			return true
		}
		found = strings.HasPrefix(e.key, prefix)
		return false
	})
	return found
}

// Count returns how many objects have keys after after (all when empty)
// that start with prefix. It visits each of them: O(count).
func (v View) Count(after, prefix string) int {
	if v.t == nil {
		return 0
	}
	if after == "" && prefix == "" {
		return v.t.Len()
	}
	n := 0
	v.t.AscendGreaterOrEqual(entry{key: max(after, prefix)}, func(e entry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if e.key != after {
			n++
		}
		return true
	})
	return n
}
