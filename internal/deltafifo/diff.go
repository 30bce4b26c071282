package deltafifo

import (
	"cmp"
	"slices"
	"time"

	"github.com/informerd/informerd/internal/object"
	"k8s.io/apimachinery/pkg/watch"
)

// diff turns a relist into the deltas that make Known equal to list: adds and
// updates ordered by resourceVersion, then deletes (at the list's RV, since
// the API server no longer says when they happened), then a Bookmark that
// moves the cache to rv, marked Synced after the first relist.
func (f *FIFO) diff(list []*object.Object, rv string, received time.Time, first bool) []Delta {
	var out []Delta
	damaged, _ := f.known.(Damaged)
	inList := make(map[string]struct{}, len(list))
	for _, o := range list {
		inList[o.Key] = struct{}{}
		old, ok := f.known.Get(o.Key)
		switch {
		case !ok:
			out = append(out, Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
		case old.UID != o.UID:
			// Deleted and created again while unwatched: say both, so a
			// client tracking UIDs sees the old one go. The delete has no RV
			// of its own; it takes the new object's so they sort together.
			out = append(out,
				Delta{Type: watch.Deleted, Object: old, ResourceVersion: o.ResourceVersion, Relist: true},
				Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
		case old.ResourceVersion != o.ResourceVersion:
			out = append(out, Delta{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
		case damaged != nil && damaged.Damaged(old):
			out = append(out, Delta{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion, Relist: true, Repair: true})
		}
	}
	// Stable, so a recreated object's Deleted stays before its Added.
	slices.SortStableFunc(out, func(a, b Delta) int {
		ra, _ := object.ParseRV(a.ResourceVersion)
		rb, _ := object.ParseRV(b.ResourceVersion)
		return cmp.Compare(ra, rb)
	})
	keys := f.known.Keys()
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := inList[k]; ok {
			continue
		}
		if old, ok := f.known.Get(k); ok {
			out = append(out, Delta{Type: watch.Deleted, Object: old, ResourceVersion: rv, Relist: true})
		}
	}
	out = append(out, Delta{Type: watch.Bookmark, ResourceVersion: rv, Relist: true, Synced: first})
	for i := range out {
		out[i].Received = received
	}
	return out
}
