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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// BenchmarkWatchFanOut: 1,000 Watch streams over an in-memory connection,
// each selecting one of 100 node names through the index; every cache event
// reaches the 10 watchers of its node. Reports events delivered to clients
// per second and heap allocations (server and clients) per delivered event.
// The cache is fed directly, so this measures the fan-out and gRPC only.
func BenchmarkWatchFanOut(b *testing.B) {
	const watchers, nodes = 1000, 100
	c, err := config.Parse([]byte(`resources: [{resource: pods, indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]}]`))
	if err != nil {
		b.Fatal(err)
	}
	set, err := pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	p := set.Pipelines()[0]
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]*object.Object, nodes)
	for i := range pods {
		if pods[i], err = enc.Encode(benchdata.Unstructured(benchdata.Pod(i, nodes, uint64(i+1)))); err != nil {
			b.Fatal(err)
		}
	}
	ix := p.Indexer()
	ix.Apply([]deltafifo.Delta{{Type: deltafifo.Bookmark, ResourceVersion: "1000"}, {Type: deltafifo.Synced, ResourceVersion: "1000"}})

	// Resolve-free: Lookup by configured name works before Run.
	lis := bufconn.Listen(4 << 20)
	gs := grpc.NewServer()
	srv := server.New(set, server.Options{WatchQueueLength: 1 << 16})
	pb.RegisterCacheServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewCacheServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delivered atomic.Int64
	for i := range watchers {
		node := fmt.Sprintf("node-%03d", i%nodes)
		ws, err := client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{node}}}, SendInitialEvents: true})
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

	rv := uint64(1000)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rv++
		o := *pods[i%nodes]
		o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
		ix.Apply([]deltafifo.Delta{{Type: deltafifo.Updated, Object: &o, ResourceVersion: o.ResourceVersion}})
	}
	want := int64(b.N) * watchers / nodes
	for delivered.Load() < want {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(want)/elapsed.Seconds(), "delivered-events/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(want), "allocs/delivered-event")
}
