package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/apimachinery/pkg/watch"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// benchServer is a pods cache fed directly (no API server) and served as
// informerd serves it (NewGRPC, the metrics observer) over an in-memory
// connection to clients that do not decode what they receive, so
// benchmarks measure the serving path only: the server's work and the
// transport's.
type benchServer struct {
	client pb.CacheServiceClient
	ix     *indexer.Indexer
	// pods are pods 0..n-1, spread over the nodes, as the Encoder builds them.
	pods []*object.Object
}

func newBenchServer(b *testing.B, pods, nodes int) *benchServer {
	b.Helper()
	return newBenchServerConfig(b, `resources: [{resource: pods, indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]}]`, pods, nodes)
}

// newBenchServerConfig is newBenchServer with the configuration file cfg,
// which must cache pods with a node index.
func newBenchServerConfig(b *testing.B, cfg string, pods, nodes int) *benchServer {
	b.Helper()
	c, err := config.Parse([]byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	set, err := pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	bs := &benchServer{ix: set.Served()[0].Cache(), pods: make([]*object.Object, pods)}
	for i := range bs.pods {
		if bs.pods[i], err = enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(i, nodes, uint64(i+1)))); err != nil {
			b.Fatal(err)
		}
	}
	bs.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "1000", Synced: true}})

	// Resolve-free: Lookup by configured name works before Run.
	lis := bufconn.Listen(4 << 20)
	srv := server.New(set, server.Options{WatchQueueLength: 1 << 16, Observer: metrics.New(prometheus.NewRegistry())})
	gs := srv.NewGRPC(server.GRPCOptions{MaxStreamsPerConnection: 10000})
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	b.Cleanup(srv.Stop)
	conn := testenv.DialBufconn(b, lis, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(discard{encoding.GetCodecV2("proto")})))
	bs.client = pb.NewCacheServiceClient(conn)
	return bs
}

// cpuTime is the CPU time the process has used, user and system: what
// serving costs, whatever the wall time on a busy machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is the client codec of the benchmarks: proto for requests, and
// responses received but not decoded.
type discard struct{ encoding.CodecV2 }

func (discard) Unmarshal(mem.BufferSlice, any) error { return nil }

// update applies a new version of pod i at rv (its JSON unchanged).
func (bs *benchServer) update(i int, rv uint64) {
	o := *bs.pods[i]
	o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
	bs.ix.Apply([]deltafifo.Delta{{Type: watch.Modified, Object: &o, ResourceVersion: o.ResourceVersion}})
}

// BenchmarkWatchFanOut: 1,000 Watch streams over an in-memory connection,
// each selecting one of 100 node names through the index; every cache event
// reaches the 10 watchers of its node. Events come as fast as the cache
// takes them, so streams fall behind and send in batches. Reports the
// process's CPU time per event, events delivered to clients per second and
// heap allocations per delivered event.
func BenchmarkWatchFanOut(b *testing.B) { benchmarkWatchFanOut(b, false) }

// BenchmarkWatchFanOutPaced is BenchmarkWatchFanOut with each event
// delivered to its 10 watchers before the next is applied, as at a modest
// rate of changes: every event wakes each of its streams on its own.
func BenchmarkWatchFanOutPaced(b *testing.B) { benchmarkWatchFanOut(b, true) }

func benchmarkWatchFanOut(b *testing.B, paced bool) {
	const watchers, nodes = 1000, 100
	bs := newBenchServer(b, nodes, nodes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Clients count what they receive and signal reached when the count
	// gets to want.
	var delivered, want atomic.Int64
	reached := make(chan struct{}, 1)
	for i := range watchers {
		node := fmt.Sprintf("node-%03d", i%nodes)
		ws, err := bs.client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{node}}}, SendInitialEvents: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ws.Recv(); err != nil { // INITIAL_EVENTS_END: joined
			b.Fatal(err)
		}
		go func() {
			for {
				if _, err := ws.Recv(); err != nil {
					return
				}
				if delivered.Add(1) == want.Load() {
					reached <- struct{}{}
				}
			}
		}()
	}

	// Not b.Loop: the timer must run until every event is delivered, so
	// that ns/op, B/op and allocs/op cover the streams' work too.
	rv := uint64(1000)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start, cpu := time.Now(), cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		rv++
		if paced {
			want.Store(int64(i+1) * watchers / nodes)
		}
		bs.update(i%nodes, rv)
		if paced {
			<-reached
		}
	}
	total := int64(b.N) * watchers / nodes
	if want.Swap(total) != total && delivered.Load() < total {
		<-reached
	}
	b.StopTimer()
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "delivered-events/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(total), "allocs/delivered-event")
}

// BenchmarkList: one List call answered with a page of 500 pods (~2 MB).
func BenchmarkList(b *testing.B) {
	const pods = 500
	bs := newBenchServer(b, pods, 100)
	for i := range pods {
		bs.update(i, uint64(1001+i))
	}
	ctx := context.Background()
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := bs.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: pods}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkGet: one Get call for one pod.
func BenchmarkGet(b *testing.B) {
	bs := newBenchServer(b, 1, 1)
	bs.update(0, 1001)
	ctx := context.Background()
	req := &pb.GetRequest{Resource: "pods", Namespace: bs.pods[0].Namespace, Name: bs.pods[0].Name}
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := bs.client.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkListPages: the pages of a List of 50,000 pods at limit 500, one
// page per op, each continuing from the previous page's token while the
// cache takes one change per page (so every page after the first is read
// at a resourceVersion the cache has moved past, as under churn). Reports
// the process's CPU time per page; allocations per page include the
// client's.
func BenchmarkListPages(b *testing.B) {
	const pods, limit = 50000, 500
	bs := newBenchServer(b, pods, 100)
	rv := uint64(1000)
	for i := range pods {
		rv++
		bs.update(i, rv)
	}
	ctx := context.Background()
	req := &pb.ListRequest{Resource: "pods", Limit: limit}
	decode := grpc.ForceCodecV2(encoding.GetCodecV2("proto"))
	b.ReportAllocs()
	cpu := cpuTime(b)
	for i := 0; b.Loop(); i++ {
		resp, err := bs.client.List(ctx, req, decode) // the token is needed
		if err != nil {
			b.Fatal(err)
		}
		req.ContinueToken = resp.GetContinueToken()
		rv++
		bs.update(i%pods, rv)
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/page")
}
