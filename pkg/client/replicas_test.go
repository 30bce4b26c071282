package client_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// named answers ListResources with its own address.
type named struct {
	pb.UnimplementedCacheServiceServer
	addr string
}

func (n named) ListResources(context.Context, *pb.ListResourcesRequest) (*pb.ListResourcesResponse, error) {
	return &pb.ListResourcesResponse{Resources: []*pb.ResourceInfo{{Name: n.addr}}}, nil
}

func serveNamed(t *testing.T) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterCacheServiceServer(gs, named{addr: lis.Addr().String()})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), gs.Stop
}

// TestDialReplicas: with several replicas, calls go to one that answers,
// and move to another when it stops.
func TestDialReplicas(t *testing.T) {
	a, stopA := serveNamed(t)
	b, stopB := serveNamed(t)
	stops := map[string]func(){a: stopA, b: stopB}
	// A replica that is gone from the start is passed over.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()

	conn, err := client.Dial(client.Config{Address: dead + ", " + a + "," + b})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewCacheServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func() string {
		t.Helper()
		resp, err := c.ListResources(ctx, &pb.ListResourcesRequest{}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("ListResources: %v", err)
		}
		return resp.GetResources()[0].GetName()
	}
	first := call()
	if first != a && first != b {
		t.Fatalf("answered by %s, want %s or %s", first, a, b)
	}
	stops[first]()
	// The connection notices the stop; a call that lands on it before then
	// fails as UNAVAILABLE, which clients retry.
	var second string
	for second == "" || second == first {
		resp, err := c.ListResources(ctx, &pb.ListResourcesRequest{}, grpc.WaitForReady(true))
		if err == nil {
			second = resp.GetResources()[0].GetName()
		} else if ctx.Err() != nil {
			t.Fatalf("no other replica answered after %s stopped: %v", first, err)
		}
	}
}

func TestDialReplicasInvalid(t *testing.T) {
	for _, addr := range []string{"a:1,unix:///x.sock", "a:1,b", "a:1,"} {
		if _, err := client.Dial(client.Config{Address: addr}); err == nil || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("Dial(%q): %v, want an error asking for host:port", addr, err)
		}
	}
	if _, err := client.Dial(client.Config{Address: "127.0.0.1:1,informerd.example:1"}); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("plaintext to a list with a remote replica: %v, want needs TLS", err)
	}
}
