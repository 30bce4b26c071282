// Command floor is a benchmark child: a bare grpc-go server with no cache
// that pushes pre-encoded WatchResponse bytes to the streams watching a
// node. Its cost per delivered event is the least any gRPC fan-out can pay
// on this machine.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/bench/internal/childproc"
	"github.com/informerd/informerd/internal/benchdata"
)

func main() { runFloorChild(os.Args[1:]) }

func nodeName(i, nodes int) string { return fmt.Sprintf("node-%03d", i%nodes) }

// rawMsg is an already encoded message; rawCodec sends it as it is.
type rawMsg []byte

type rawCodec struct{ proto encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if raw, ok := v.(rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(raw)}, nil
	}
	return c.proto.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }
func (c rawCodec) Name() string                                { return "proto" }

type floorServer struct {
	pb.UnimplementedCacheServiceServer
	mu      sync.Mutex
	streams map[string][]chan rawMsg // by node
	count   int
	joined  chan struct{}
	want    int
}

func (f *floorServer) Watch(req *pb.WatchRequest, stream pb.CacheService_WatchServer) error {
	// A small buffer: a channel of 100,000 slots per stream held 2.4 GB of
	// pointer slots at 1,000 streams, which every GC cycle scanned, and
	// that inflated the floor's CPU. The generator waits for a full one.
	ch := make(chan rawMsg, 256)
	node := req.GetSelector().GetIndex().GetValues()[0]
	f.mu.Lock()
	f.streams[node] = append(f.streams[node], ch)
	f.count++
	if f.count == f.want {
		close(f.joined)
	}
	f.mu.Unlock()
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case m := <-ch:
			if err := stream.SendMsg(m); err != nil {
				return err
			}
		}
	}
}

// runFloorChild serves until stdin closes. After its ready line it reads
// commands "run RATE SECONDS PODS NODES" and answers "done N" after
// generating N events at RATE per second.
func runFloorChild(args []string) {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	addr := fs.String("addr", "", "")
	watchers := fs.Int("watchers", 0, "")
	_ = fs.Parse(args)
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		childproc.Announce(childproc.Report{Error: err.Error()})
		return
	}
	f := &floorServer{streams: map[string][]chan rawMsg{}, joined: make(chan struct{}), want: *watchers}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{proto: encoding.GetCodecV2("proto")}), grpc.MaxConcurrentStreams(100000))
	pb.RegisterCacheServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	childproc.Announce(childproc.Report{})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var rate, seconds float64
		var pods, nodes int
		if _, err := fmt.Sscanf(in.Text(), "run %g %g %d %d", &rate, &seconds, &pods, &nodes); err != nil {
			fmt.Println("error", err)
			continue
		}
		<-f.joined
		fmt.Println("done", f.generate(rate, time.Duration(seconds*float64(time.Second)), pods, nodes))
	}
	gs.Stop()
}

// generate sends events for pods picked at random, each to the streams of
// the pod's node, at rate per second for d. Each event's resource_version
// is its generation time in Unix nanoseconds, for the delay.
func (f *floorServer) generate(rate float64, d time.Duration, pods, nodes int) int {
	payload := make([][]byte, pods)
	for i := range payload {
		p := benchdata.Pod(i, nodes, 0)
		p.ManagedFields = nil
		payload[i], _ = json.Marshal(p)
	}
	start := time.Now()
	sent := 0
	for time.Since(start) < d {
		// Pace in 10ms slots.
		due := int(rate * time.Since(start).Seconds())
		for ; sent < due; sent++ {
			i := rand.IntN(pods)
			msg, _ := proto.Marshal(&pb.WatchResponse{
				Type:            pb.EventType_EVENT_TYPE_MODIFIED,
				ResourceVersion: strconv.FormatInt(time.Now().UnixNano(), 10),
				Object:          &pb.Object{Namespace: "bench", Name: fmt.Sprint(i), Json: payload[i]},
			})
			f.mu.Lock()
			targets := f.streams[nodeName(i, nodes)]
			f.mu.Unlock()
			for _, ch := range targets {
				ch <- msg
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sent
}
