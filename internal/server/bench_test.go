package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// benchServer is a pods cache fed directly (no API server) and served as
// informerd serves it (NewGRPC, the metrics observer) over an in-memory
// connection, so benchmarks measure the serving path only.
type benchServer struct {
	client pb.CacheServiceClient
	ix     *indexer.Indexer
	// pods are pods 0..n-1, spread over the nodes, as the Encoder builds them.
	pods []*object.Object
}

func newBenchServer(b *testing.B, pods, nodes int) *benchServer {
	b.Helper()
	c, err := config.Parse([]byte(`resources: [{resource: pods, indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]}]`))
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
	bs := &benchServer{ix: set.Pipelines()[0].Indexer(), pods: make([]*object.Object, pods)}
	for i := range bs.pods {
		if bs.pods[i], err = enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(i, nodes, uint64(i+1)))); err != nil {
			b.Fatal(err)
		}
	}
	bs.ix.Apply([]deltafifo.Delta{{Type: deltafifo.Bookmark, ResourceVersion: "1000"}, {Type: deltafifo.Synced, ResourceVersion: "1000"}})

	// Resolve-free: Lookup by configured name works before Run.
	lis := bufconn.Listen(4 << 20)
	srv := server.New(set, server.Options{WatchQueueLength: 1 << 16, Observer: metrics.New(prometheus.NewRegistry())})
	gs := srv.NewGRPC(server.GRPCOptions{MaxStreamsPerConnection: 10000})
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)
	b.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	bs.client = pb.NewCacheServiceClient(conn)
	return bs
}

// update applies a new version of pod i at rv. Like the Encoder, it
// encodes the object's wire form once, whatever number of streams it
// reaches.
func (bs *benchServer) update(i int, rv uint64) {
	o := *bs.pods[i]
	o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
	o.Proto, _ = proto.Marshal(&pb.Object{Namespace: o.Namespace, Name: o.Name, Uid: o.UID, ResourceVersion: o.ResourceVersion, Json: o.JSON})
	bs.ix.Apply([]deltafifo.Delta{{Type: deltafifo.Updated, Object: &o, ResourceVersion: o.ResourceVersion}})
}

// BenchmarkWatchFanOut: 1,000 Watch streams over an in-memory connection,
// each selecting one of 100 node names through the index; every cache event
// reaches the 10 watchers of its node. Reports events delivered to clients
// per second and heap allocations (server and clients) per delivered event.
func BenchmarkWatchFanOut(b *testing.B) {
	const watchers, nodes = 1000, 100
	bs := newBenchServer(b, nodes, nodes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delivered atomic.Int64
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
				delivered.Add(1)
			}
		}()
	}

	// Not b.Loop: the timer must run until every event is delivered, so
	// that ns/op, B/op and allocs/op cover the streams' work too.
	rv := uint64(1000)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		rv++
		bs.update(i%nodes, rv)
	}
	want := int64(b.N) * watchers / nodes
	for delivered.Load() < want {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	elapsed := time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(want)/elapsed.Seconds(), "delivered-events/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(want), "allocs/delivered-event")
}

// BenchmarkList: one List call answered with a page of 500 pods (~2 MB).
func BenchmarkList(b *testing.B) {
	const pods = 500
	bs := newBenchServer(b, pods, 100)
	for i := range pods {
		bs.update(i, uint64(1001+i))
	}
	ctx := context.Background()
	for b.Loop() {
		resp, err := bs.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: pods})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(resp.GetObjects()); n != pods {
			b.Fatalf("List returned %d objects, want %d", n, pods)
		}
	}
}

// BenchmarkGet: one Get call for one pod.
func BenchmarkGet(b *testing.B) {
	bs := newBenchServer(b, 1, 1)
	bs.update(0, 1001)
	ctx := context.Background()
	req := &pb.GetRequest{Resource: "pods", Namespace: bs.pods[0].Namespace, Name: bs.pods[0].Name}
	for b.Loop() {
		if _, err := bs.client.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
