package kubeapi

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

const (
	benchPods  = 10000
	benchNodes = 100
	// benchWatchers is how many watchers share each event in
	// BenchmarkEventForms: each object version is encoded once for them.
	benchWatchers = 1000
)

var podKind = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// benchObjects returns n realistic pods as the cache holds them for the
// Kubernetes API (managedFields kept), indexed by node.
func benchObjects(b *testing.B, n int) []*object.Object {
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, false)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*object.Object, n)
	for i := range n {
		p := benchdata.Pod(i, benchNodes, uint64(i+1))
		if i%10 == 0 {
			p.Status.Phase = "Succeeded"
		}
		if out[i], err = enc.EncodeUnstructured(benchdata.Unstructured(p)); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// BenchmarkEventForms is what one watch event costs the Kubernetes API to
// write in each form a client may ask for, per delivered event, with each
// object version shared by benchWatchers watchers (the fan-out: encoded
// once, then looked up): bytes per event on the wire, and ns per event
// (×1,000 for CPU-µs per 1,000 events). "alone" has a new object version
// for every event: each is encoded (and kept) for one watcher, the cost a
// server without shared encodings pays for every watcher.
func BenchmarkEventForms(b *testing.B) {
	objs := benchObjects(b, 200)
	forms := []struct {
		name   string
		out    output
		proto  bool
		shared bool
	}{
		{"json", output{}, false, true},
		{"json without managedFields", output{dropManagedFields: true}, false, true},
		{"metadata", output{as: asMetadata, metaGV: metav1.SchemeGroupVersion}, false, true},
		{"metadata alone", output{as: asMetadata, metaGV: metav1.SchemeGroupVersion}, false, false},
		{"metadata without managedFields", output{as: asMetadata, metaGV: metav1.SchemeGroupVersion, dropManagedFields: true}, false, true},
		{"protobuf", output{media: mediaProtobuf}, true, true},
		{"protobuf alone", output{media: mediaProtobuf}, true, false},
		{"protobuf metadata", output{media: mediaProtobuf, as: asMetadata, metaGV: metav1.SchemeGroupVersion}, true, true},
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			h := &Handler{forms: newForms(DefaultMaxFormBytes)}
			w := bufio.NewWriter(io.Discard)
			hdr := make([]byte, 0, 32)
			var bytes int
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				o := objs[(i/benchWatchers)%len(objs)]
				if !f.shared {
					// A fresh object version for every event: nothing to share.
					c := *o
					o = &c
				}
				var n int
				if f.proto {
					n, _ = h.writeProtoEvent(w, hdr, &f.out, podKind, string(watch.Modified), o, nil)
				} else {
					obj, _ := h.objectJSON(&f.out, o)
					n = writeJSONEvent(w, obj)
				}
				bytes += n
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/event")
		})
	}
}

func writeJSONEvent(w *bufio.Writer, obj []byte) int {
	n, _ := w.WriteString(`{"type":"MODIFIED","object":`)
	m, _ := w.Write(obj)
	k, _ := w.WriteString("}\n")
	return n + m + k
}

// BenchmarkFieldSelector lists the pods of 10,000 that a field selector
// selects from the cache: an indexed field through its index, other fields
// by a scan that reads each pod's JSON. Reported: p50 and p99 of one list.
func BenchmarkFieldSelector(b *testing.B) {
	objs := benchObjects(b, benchPods)
	ix := indexer.New([]string{"namespace", "node"}, indexer.Options{HistoryMaxEvents: 10})
	ds := make([]deltafifo.Delta, 0, len(objs)+1)
	for _, o := range objs {
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ix.Apply(append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: strconv.Itoa(benchPods), Synced: true}))
	pods := func() *fieldSet { return fieldsOf(podKind, true, nil, false) }
	for _, c := range []struct{ name, selector string }{
		{"index spec.nodeName", "spec.nodeName=node-042"},
		{"scan status.phase", "status.phase=Succeeded"},
		{"scan status.phase!=", "status.phase!=Succeeded"},
		{"scan spec.schedulerName and spec.nodeName by index", "spec.schedulerName=default-scheduler,spec.nodeName=node-042"},
	} {
		b.Run(c.name, func(b *testing.B) {
			fs, err := fields.ParseSelector(c.selector)
			if err != nil {
				b.Fatal(err)
			}
			sel, err := newSelector(&metainternalversion.ListOptions{FieldSelector: fs}, "", pods, ix.IndexNames(), map[string]string{"spec.nodeName": "node"})
			if err != nil {
				b.Fatal(err)
			}
			var took []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				var n int
				if sel.sel.Index >= 0 {
					s, err := ix.ByIndex(ix.IndexNames()[sel.sel.Index], sel.sel.Values, sel.sel.Matches)
					if err != nil {
						b.Fatal(err)
					}
					n = len(s.Objects)
				} else {
					got, _ := ix.View().Page("", "", math.MaxInt, sel.sel.Matches)
					n = len(got)
				}
				took = append(took, time.Since(start))
				if n == 0 {
					b.Fatalf("%s selected nothing", c.selector)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds()), "p99-µs")
		})
	}
}
