package fanout

import (
	"context"
	"fmt"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	benchPods     = 10000
	benchNodes    = 100
	benchWatchers = 1000
	benchHistory  = 10000
)

// benchPodsEncoded returns n realistic pods as the cache holds them.
func benchPodsEncoded(b *testing.B, n int) []*object.Object {
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*object.Object, n)
	for i := range n {
		if out[i], err = enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(i, benchNodes, uint64(i+1)))); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// benchCache is a synced cache of pods with a hub, as one resource's
// pipeline holds them.
func benchCache(b *testing.B, pods []*object.Object, queue int) (*indexer.Indexer, *Hub) {
	ix := indexer.New([]string{"namespace", "node"}, indexer.Options{HistoryMaxEvents: benchHistory})
	ds := make([]deltafifo.Delta, 0, len(pods)+2)
	for _, o := range pods {
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	rv := strconv.Itoa(len(pods))
	ix.Apply(append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: rv, Synced: true}))
	hub := New(ix, Options{QueueLength: queue})
	b.Cleanup(func() { hub.Close(nil) })
	return ix, hub
}

// updater applies updates of the pods at increasing resourceVersions.
type updater struct {
	ix   *indexer.Indexer
	pods []*object.Object
	rv   uint64
}

func (u *updater) next() {
	o := *u.pods[int(u.rv)%len(u.pods)]
	u.rv++
	o.RV, o.ResourceVersion = u.rv, strconv.FormatUint(u.rv, 10)
	u.ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: &o, ResourceVersion: o.ResourceVersion}})
}

// consume reads w until it has received an item at rv or later, and
// returns how many items it received.
func consume(w *Watcher, rv uint64) (int, error) {
	n := 0
	for {
		items, err := w.Next(context.Background())
		if err != nil {
			return n, err
		}
		n += len(items)
		if last := items[len(items)-1]; last.Type != watch.Bookmark && last.Object.RV >= rv {
			return n, nil
		}
	}
}

// heapPeak samples the live heap every millisecond until stop is closed
// and returns the highest it saw.
func heapPeak(stop <-chan struct{}) uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkLaggingBurst is a burst of 20,000 changes to a cache of 10,000
// pods watched by 1,000 select-all watchers whose clients stall through the
// first 9,000 (their queues overflow and they lag), then all read at once
// while the other 11,000 arrive: every watcher catches up from the 10,000
// event history at the same time. It reports the live heap's peak above
// the heap before the burst, and the bytes allocated, per burst.
func BenchmarkLaggingBurst(b *testing.B) {
	const burst, stalled = 20000, 9000
	pods := benchPodsEncoded(b, benchPods)
	for b.Loop() {
		b.StopTimer()
		ix, hub := benchCache(b, pods, 1000)
		ws := make([]*Watcher, benchWatchers)
		for i := range ws {
			w, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
			if err != nil {
				b.Fatal(err)
			}
			ws[i] = w
		}
		u := &updater{ix: ix, pods: pods, rv: uint64(len(pods))}
		last := u.rv + burst
		base := benchdata.HeapAfterGC()
		allocs := allocated()
		stop, peak := make(chan struct{}), make(chan uint64)
		go func() { peak <- heapPeak(stop) }()
		b.StartTimer()

		for range stalled {
			u.next()
		}
		var wg sync.WaitGroup
		var failed atomic.Value
		for _, w := range ws {
			wg.Go(func() {
				if _, err := consume(w, last); err != nil {
					failed.Store(err)
				}
			})
		}
		for range burst - stalled {
			u.next()
		}
		wg.Wait()

		b.StopTimer()
		close(stop)
		p := <-peak
		if err := failed.Load(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(p-min(p, base))/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(allocated()-allocs)/(1<<20), "alloc-MiB")
		hub.Close(nil)
		b.StartTimer()
	}
}

// BenchmarkReadsDuringFanout measures Get and List latency on a resource
// while its changes are fanned out as fast as they can be applied to 1,000
// select-all watchers, which read as fast as they can: the cost to readers
// of dispatching under (or outside) the cache's lock. List is by index (a
// node's 100 pods); a List page is the first 500 of all 10,000.
func BenchmarkReadsDuringFanout(b *testing.B) {
	pods := benchPodsEncoded(b, benchPods)
	ix, hub := benchCache(b, pods, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range benchWatchers {
		w, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer w.Close()
			for ctx.Err() == nil {
				if _, err := w.Next(ctx); err != nil && ctx.Err() == nil {
					if _, ok := err.(*TooSlowError); !ok {
						b.Error(err)
					}
					return
				}
			}
		})
	}
	u := &updater{ix: ix, pods: pods, rv: uint64(len(pods))}
	var applied atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			u.next()
			applied.Add(1)
		}
	})
	var gets, lists, pages []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, ok := ix.Get(pods[i%len(pods)].Key); !ok {
			b.Fatal("missing pod")
		}
		t1 := time.Now()
		if n := benchListByIndex(b, ix, fmt.Sprintf("node-%03d", i%benchNodes)); n != benchPods/benchNodes {
			b.Fatalf("listed %d pods", n)
		}
		t2 := time.Now()
		if n := benchListPage(ix, 500); n != 500 {
			b.Fatalf("page of %d pods", n)
		}
		gets, lists, pages = append(gets, t1.Sub(t0)), append(lists, t2.Sub(t1)), append(pages, time.Since(t2))
	}
	b.StopTimer()
	cancel()
	hub.Close(nil)
	wg.Wait()
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"get", gets}, {"list", lists}, {"page", pages}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2])/1e3, m.name+"-p50-µs")
		b.ReportMetric(float64(m.d[len(m.d)*99/100])/1e3, m.name+"-p99-µs")
	}
	b.ReportMetric(float64(applied.Load())/b.Elapsed().Seconds(), "writes/s")
}

// The benchmarks read the cache as the server does.

func benchListByIndex(b *testing.B, ix *indexer.Indexer, node string) int {
	s, err := ix.ByIndex("node", []string{node}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return len(s.Objects)
}

func benchListPage(ix *indexer.Indexer, limit int) int {
	objs, _ := ix.View().Page("", "", limit, nil)
	return len(objs)
}
