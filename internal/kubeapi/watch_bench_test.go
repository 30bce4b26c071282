package kubeapi

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/printers"
)

// fakeServed is a served resource of pods over a cache; only Resolved and
// Cache may be called.
type fakeServed struct {
	pipeline.Served
	cache *indexer.Indexer
}

func (fakeServed) Resolved() pipeline.Resolved {
	return pipeline.Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true}
}

func (f fakeServed) Cache() *indexer.Indexer { return f.cache }

// discardResponse is a watch's ResponseWriter that keeps nothing: it
// counts the bytes written and the flushes.
type discardResponse struct {
	header  http.Header
	n       int
	flushes int
}

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) WriteHeader(int)             {}
func (d *discardResponse) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discardResponse) FlushError() error           { d.flushes++; return nil }

// BenchmarkWatchFrames is what writing one watch event to one Kubernetes
// API watcher costs, in each encoding a client may ask for, with every
// event delivered to benchWatchers watchers of that encoding (a fan-out,
// each watcher polling the event alone): one op is one event written and
// flushed to one watcher, into a response that keeps nothing (net/http's
// own costs are not counted). Each watcher's writer is built before the
// loop, as a watch builds it once; a Table watcher is past its first
// event. The gzip cases are compressed WatchLists, one gzip member per
// flush, each event's member shared by its watchers.
func BenchmarkWatchFrames(b *testing.B) {
	objs := benchObjects(b, 200)
	podPrinter, _ := printers.For(schema.GroupResource{Resource: "pods"})
	encodings := []struct {
		name string
		out  output
		gzip bool // a compressed WatchList: one gzip member per flush
	}{
		{"protobuf gzip", output{media: mediaProtobuf}, true},
		{"json gzip", output{}, true},
		{"json", output{}, false},
		{"json drop managedFields", output{dropManagedFields: true}, false},
		{"metadata", output{as: asMetadata, metaGV: metav1.SchemeGroupVersion}, false},
		{"protobuf", output{media: mediaProtobuf}, false},
		{"protobuf metadata", output{media: mediaProtobuf, as: asMetadata, metaGV: metav1.SchemeGroupVersion}, false},
		{"table", output{as: asTable, metaGV: metav1.SchemeGroupVersion, table: tableOptions{include: metav1.IncludeMetadata}}, false},
	}
	for _, enc := range encodings {
		b.Run(enc.name, func(b *testing.B) {
			h := &Handler{forms: newForms(DefaultMaxFormBytes)}
			cols := &columns{printer: podPrinter}
			writers := make([]*eventWriter, benchWatchers)
			sinks := make([]*discardResponse, benchWatchers)
			for i := range writers {
				sinks[i] = &discardResponse{header: http.Header{}}
				if enc.gzip {
					fg := &flushGzip{ResponseWriter: sinks[i]}
					fg.WriteHeader(http.StatusOK)
					writers[i] = benchEventWriter(h, &enc.out, cols, fg)
					writers[i].gzip = fg
				} else {
					writers[i] = benchEventWriter(h, &enc.out, cols, sinks[i])
				}
				writers[i].headed = true // past the first event of a Table watch
			}
			items := make([]fanout.Item, 1)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				o := objs[(i/benchWatchers)%len(objs)]
				items[0] = fanout.Item{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion}
				w := writers[i%benchWatchers]
				if !w.write(items) || !w.flush() {
					b.Fatal("write failed")
				}
			}
			var bytes int
			for _, s := range sinks {
				bytes += s.n
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/event")
		})
	}
}

// benchEventWriter is a watch's writer of events in out to w.
func benchEventWriter(h *Handler, out *output, cols *columns, w http.ResponseWriter) *eventWriter {
	e := newEventWriter(h, fakeServed{}, w, out)
	e.cols = cols
	return e
}
