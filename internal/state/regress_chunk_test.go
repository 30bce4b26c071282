package state

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// A relist diff of more than maxBatch events must be written in one
// transaction: written in several, each moving the position to the RV of
// its last event, a SIGKILL between two of them would leave a state "at RV
// R" that is no snapshot of the API server at R — the diff's deletes (all
// at the list's RV, last) missing although they happened before R — and
// the restart would resume the upstream watch from R, which never sends
// them again: a ghost object.
func TestSIGKILLAfterFirstChunkOfRelist(t *testing.T) {
	c := newCache(t, 100000)
	fifo := deltafifo.New(c.ix, 10)
	const n = 4200
	var list []*object.Object
	list = append(list, c.obj(t, "x", 1, "a0"))
	for i := range n {
		list = append(list, c.obj(t, fmt.Sprintf("m%04d", i), 2, "a0"))
	}
	apply := func(objs []*object.Object, rv string) {
		if err := fifo.Replace(objs, rv); err != nil {
			t.Fatal(err)
		}
		ds, err := fifo.Pop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.ix.Apply(ds)
	}
	apply(list, "10") // first list
	d := openDir(t, t.TempDir(), testID)
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	defer r.close()
	if err := r.flush(c.ix); err != nil {
		t.Fatal(err)
	}
	// While the watch was broken: x deleted at RV 11, every m modified at
	// 12..n+11. The relist at n+11 is diffed into the cache.
	list = list[:0]
	for i := range n {
		list = append(list, c.obj(t, fmt.Sprintf("m%04d", i), 12+i, "a0"))
	}
	apply(list, fmt.Sprint(n+11))

	// write()'s first iteration, then SIGKILL.
	ch, err := c.ix.ChangesAfter(r.pos.Seq, maxBatch)
	if err != nil {
		t.Fatal(err)
	}
	next := position{ResourceVersion: ch.At.ResourceVersion, Seq: ch.At.Seq, Floor: ch.Floor, FloorSeq: ch.FloorSeq, SavedAt: time.Now()}
	if err := r.db.Update(func(tx *bolt.Tx) error { return appendTx(tx, ch.Events, next) }); err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(t.TempDir(), "c")
	copyFile(t, r.path, filepath.Join(crash, "pods.db"))

	got, l, err := restore(t, crash, 100000)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	rv := got.ix.Stats().ResourceVersion
	if _, ok := got.ix.Get("ns/x"); ok {
		t.Errorf("restored at resourceVersion %s with ns/x, deleted upstream at 11: a watch resumed from %s never deletes it", rv, rv)
	}
}
