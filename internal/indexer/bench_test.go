package indexer

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

const (
	benchPods  = 10000
	benchNodes = 100
)

func benchEncoder(b *testing.B, strip bool) *object.Encoder {
	enc, err := object.NewEncoder([]object.IndexSpec{
		{Name: "node", JSONPath: "{.spec.nodeName}"},
		{Name: "app", Label: "app"},
	}, strip)
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

// encodedPods returns n realistic pods encoded as the cache holds them.
func encodedPods(b *testing.B, n int, firstRV uint64) []*object.Object {
	enc := benchEncoder(b, true)
	out := make([]*object.Object, n)
	for i := range n {
		o, err := enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(i, benchNodes, firstRV+uint64(i))))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = o
	}
	return out
}

func filled(b *testing.B, objs []*object.Object, historyEvents int) *Indexer {
	ix := New([]string{"namespace", "node", "app"}, Options{HistoryMaxEvents: historyEvents})
	ds := make([]deltafifo.Delta, 0, len(objs)+2)
	for _, o := range objs {
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	rv := strconv.Itoa(int(objs[len(objs)-1].RV))
	ix.Apply(append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: rv, Synced: true}))
	return ix
}

// BenchmarkIngest measures applying one update to a cache of 10,000 pods:
// index maintenance, history and listener dispatch (no listeners here).
func BenchmarkIngest(b *testing.B) {
	objs := encodedPods(b, benchPods, 1)
	ix := filled(b, objs, 10000)
	rv := uint64(benchPods + 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		src := objs[i%benchPods]
		o := *src
		o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
		rv++
		ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: &o, ResourceVersion: o.ResourceVersion}})
	}
}

func BenchmarkGet(b *testing.B) {
	objs := encodedPods(b, benchPods, 1)
	ix := filled(b, objs, 10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := ix.Get(objs[i%benchPods].Key); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkListByIndex lists "the pods on my node": 100 of 10,000.
func BenchmarkListByIndex(b *testing.B) {
	objs := encodedPods(b, benchPods, 1)
	ix := filled(b, objs, 10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := ix.ByIndex("node", []string{fmt.Sprintf("node-%03d", i%benchNodes)}, nil)
		if err != nil || len(s.Objects) != benchPods/benchNodes {
			b.Fatalf("got %d objects, %v", len(s.Objects), err)
		}
	}
}

// BenchmarkHistoryReplay resumes a watch 5,000 events back in a full
// 10,000-event history.
func BenchmarkHistoryReplay(b *testing.B) {
	objs := encodedPods(b, benchPods, 1)
	ix := filled(b, objs[:1], benchPods)
	for _, o := range objs[1:] {
		ix.Apply([]deltafifo.Delta{{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion}})
	}
	from := strconv.Itoa(benchPods / 2)
	b.ReportAllocs()
	for b.Loop() {
		evs, err := since(ix, from)
		if err != nil || len(evs) != benchPods/2 {
			b.Fatalf("got %d events, %v", len(evs), err)
		}
	}
}

// BenchmarkHeapPerPod reports the heap bytes per cached Pod for 10,000
// realistic Pods (managedFields stripped), next to the JSON size of the
// cached form, and the same for a client-go informer's store of decoded
// Pods, with and without managedFields.
func BenchmarkHeapPerPod(b *testing.B) {
	raw := make([][]byte, benchPods)
	var fullJSON int
	for i := range raw {
		data, err := json.Marshal(benchdata.Pod(i, benchNodes, uint64(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		raw[i] = data
		fullJSON += len(data)
	}
	for b.Loop() {
		// informerd: scan the watch event's JSON, encode once, index;
		// with managedFields stripped (the gRPC-only default) and kept
		// (the default with --kube-api-address).
		heap := func(strip bool) (perPod float64, cachedJSON int) {
			enc := benchEncoder(b, strip)
			before := benchdata.HeapAfterGC()
			objs := make([]*object.Object, benchPods)
			for i, data := range raw {
				r, err := object.ParseRaw(slices.Clone(data))
				if err != nil {
					b.Fatal(err)
				}
				o, err := enc.Encode(r)
				if err != nil {
					b.Fatal(err)
				}
				objs[i] = o
				cachedJSON += o.Len()
			}
			ix := filled(b, objs, 10)
			objs = nil
			perPod = float64(benchdata.HeapAfterGC()-before) / benchPods
			runtime.KeepAlive(ix)
			return perPod, cachedJSON
		}
		informerd, cachedJSON := heap(true)
		kept, _ := heap(false)

		clientGo := func(strip bool) float64 {
			before := benchdata.HeapAfterGC()
			store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, data := range raw {
				p := &corev1.Pod{}
				if err := json.Unmarshal(data, p); err != nil {
					b.Fatal(err)
				}
				if strip {
					p.ManagedFields = nil
				}
				if err := store.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(benchdata.HeapAfterGC()-before) / benchPods
			runtime.KeepAlive(store)
			return n
		}
		withMF, stripped := clientGo(false), clientGo(true)

		b.ReportMetric(informerd, "informerd-heap-B/pod")
		b.ReportMetric(kept, "informerd-kept-mf-heap-B/pod")
		b.ReportMetric(float64(cachedJSON)/benchPods, "cached-json-B/pod")
		b.ReportMetric(informerd/(float64(cachedJSON)/benchPods), "heap/json")
		b.ReportMetric(float64(fullJSON)/benchPods, "full-json-B/pod")
		b.ReportMetric(withMF, "clientgo-heap-B/pod")
		b.ReportMetric(stripped, "clientgo-stripped-heap-B/pod")
	}
}
