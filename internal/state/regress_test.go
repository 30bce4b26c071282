package state

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

func agedCache(t *testing.T, maxEvents int, maxAge time.Duration) *cache {
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "app", Label: "app"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	return &cache{enc: enc, ix: indexer.New(enc.IndexNames(), indexer.Options{HistoryMaxEvents: maxEvents, HistoryMaxAge: maxAge})}
}

func modify(t *testing.T, c *cache, name string, rv int) {
	o := c.obj(t, name, rv, "a0")
	c.ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion}})
}

func syncCache(t *testing.T, c *cache) {
	var ds []deltafifo.Delta
	for i := range 3 {
		o := c.obj(t, fmt.Sprintf("p%d", i), i+1, "a0")
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: "3", Synced: true})
	c.ix.Apply(ds)
}

// Two restarts: the history's age counts only time informerd ran, across
// every restart — the first restart's downtime is not forgotten by the
// second, so no event comes back older than the cache that wrote the state
// held it, and a client resuming from what was served before a graceful
// stop is not refused after it.
func TestAgeShiftSurvivesRestarts(t *testing.T) {
	const maxAge = 2 * time.Second
	dir := t.TempDir()
	src := Source{StripManagedFields: true}

	// Session 1: e1 at T0, written.
	c1 := agedCache(t, 100, maxAge)
	d1 := openDir(t, dir, testID)
	r1 := d1.Resource("pods", src)
	r1.resolved = testResolved
	syncCache(t, c1)
	modify(t, c1, "p0", 10) // e1
	if err := r1.flush(c1.ix); err != nil {
		t.Fatal(err)
	}
	r1.close()
	d1.Close()

	time.Sleep(1500 * time.Millisecond) // down 1.5 s

	// Session 2: restored (e1 shifted by 1.5 s), runs 1 s, stops gracefully.
	c2 := agedCache(t, 100, maxAge)
	d2 := openDir(t, dir, testID)
	r2 := d2.Resource("pods", src)
	l, err := r2.Load(c2.decode, time.Now())
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := c2.ix.Restore(l.Cache); err != nil {
		t.Fatal(err)
	}
	r2.resolved = testResolved
	modify(t, c2, "p1", 11) // e2
	if err := r2.flush(c2.ix); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	modify(t, c2, "p2", 12)                 // e3
	if err := r2.flush(c2.ix); err != nil { // final flush at shutdown
		t.Fatal(err)
	}
	r2.close()
	d2.Close()
	served := c2.ix.Stats().HistoryFloor // session 2 served resumes from here

	// Session 3: restarted at once.
	c3 := agedCache(t, 100, maxAge)
	d3 := openDir(t, dir, testID)
	r3 := d3.Resource("pods", src)
	l, err = r3.Load(c3.decode, time.Now())
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	defer r3.close()
	if err := c3.ix.Restore(l.Cache); err != nil {
		t.Fatal(err)
	}
	// The upstream watch resumes: the next change reaches both caches.
	modify(t, c2, "p0", 13)
	modify(t, c3, "p0", 13)
	f2, f3 := c2.ix.Stats().HistoryFloor, c3.ix.Stats().HistoryFloor
	t.Logf("floor served before the stop %d; after the same change: cache that wrote %d, restored %d", served, f2, f3)
	if _, err := replay(c3.ix, served); errors.Is(err, indexer.ErrTooOld) {
		t.Errorf("a client resuming from %d (inside the history served before a graceful stop) gets OUT_OF_RANGE after the restart: %v", served, err)
	}
}

// A history smaller at restore than when written: restore, write, restore
// again; the second restore must serve what the first served.
func TestSmallerHistoryAtRestore(t *testing.T) {
	dir, _ := writtenState(t) // history 20
	src := Source{StripManagedFields: true}
	c := newCache(t, 5)
	d := openDir(t, dir, testID)
	r := d.Resource("pods", src)
	l, err := r.Load(c.decode, time.Now())
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := c.ix.Restore(l.Cache); err != nil {
		t.Fatal(err)
	}
	r.resolved = testResolved
	modify(t, c, "p3", 100000)
	if err := r.flush(c.ix); err != nil {
		t.Fatal(err)
	}
	want := viewOf(t, c.ix)
	r.close()
	d.Close()
	got, _, err := restore(t, dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, viewOf(t, got.ix)); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}
