package state

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// benchPod is the bench harness's pod (about 4 KB of JSON without
// managedFields) at resourceVersion rv, encoded as the cache holds it.
func benchPod(b *testing.B, c *cache, i int, rv uint64) *object.Object {
	p := benchdata.Pod(i, 100, rv)
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	r, err := object.ParseRaw(data)
	if err != nil {
		b.Fatal(err)
	}
	c.enc.Transform(r)
	o, err := c.enc.Encode(r)
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// syncedPods is a cache of n bench pods, synced.
func syncedPods(b *testing.B, n, history int) (*cache, uint64) {
	c := newCache(b, history)
	var ds []deltafifo.Delta
	for i := range n {
		o := benchPod(b, c, i, uint64(i+1))
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: fmt.Sprint(n), Synced: true})
	c.ix.Apply(ds)
	return c, uint64(n)
}

// BenchmarkFlush measures the steady-state cost of --state-dir per change:
// 1,000 pod updates (the default --state-flush-events) written in one
// flush, with the fold of the events that left the history window; b.N
// counts changes.
func BenchmarkFlush(b *testing.B) {
	const pods, batch = 2000, 1000
	c, rv := syncedPods(b, pods, 10000)
	d := openDir(b, b.TempDir(), testID)
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	defer r.close()
	if err := r.flush(c.ix); err != nil {
		b.Fatal(err)
	}
	updates := make([]*object.Object, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		n := min(batch, b.N-done)
		for i := range n {
			rv++
			updates[i] = benchPod(b, c, (done+i)%pods, rv)
			c.ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: updates[i], ResourceVersion: updates[i].ResourceVersion}})
		}
		b.StartTimer()
		if err := r.flush(c.ix); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.StopTimer()
	st := r.Stats()
	b.ReportMetric(float64(st.Bytes)/pods, "file-bytes/pod")
}

// BenchmarkLoad measures a warm start's read of a state of 2,000 pods and
// a history of 1,000 events, checks and decode included; b.N counts loads.
func BenchmarkLoad(b *testing.B) {
	const pods = 2000
	c, rv := syncedPods(b, pods, 10000)
	dir := b.TempDir()
	d := openDir(b, dir, testID)
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	for i := range 1000 {
		rv++
		o := benchPod(b, c, i, rv)
		c.ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion}})
	}
	if err := r.flush(c.ix); err != nil {
		b.Fatal(err)
	}
	r.close()
	d.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d := openDir(b, dir, testID)
		r := d.Resource("pods", Source{StripManagedFields: true})
		l, err := r.Load(c.decode, time.Now())
		if err != nil || l == nil || len(l.Cache.Objects) != pods {
			b.Fatalf("load: %v", err)
		}
		r.close()
		d.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*pods), "µs/pod")
}
