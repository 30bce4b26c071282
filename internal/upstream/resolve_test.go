package upstream_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/apimachinery/pkg/runtime/schema"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/upstream"
)

// resolving is an upstream that serves configmaps, first unresolved (it
// has just started: no version, kind or scope), then resolved.
type resolving struct {
	pb.UnimplementedCacheServiceServer
	resolved atomic.Bool
}

func (r *resolving) ListResources(context.Context, *pb.ListResourcesRequest) (*pb.ListResourcesResponse, error) {
	info := &pb.ResourceInfo{Name: "configmaps"}
	if r.resolved.Load() {
		info.Version, info.Kind, info.Namespaced = "v1", "ConfigMap", true
	}
	return &pb.ListResourcesResponse{Resources: []*pb.ResourceInfo{info}}, nil
}

// TestResolveWaitsForTheUpstream: a resource the upstream has not resolved
// yet is not taken as resolved (it would be cached with no version, kind
// or scope, and a leaf's --state-dir would write a state that cannot be
// read back); once the upstream has resolved it, it is.
func TestResolveWaitsForTheUpstream(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	up := &resolving{}
	pb.RegisterCacheServiceServer(gs, up)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	src := upstream.New(conn, "root:50051")
	ctx := context.Background()
	if res, err := src.Resolve(ctx, "configmaps"); err == nil || !strings.Contains(err.Error(), "has not resolved") {
		t.Errorf("Resolve of a resource the upstream has not resolved: %+v, %v; want an error to retry on", res, err)
	}
	up.resolved.Store(true)
	src.Reset() // as the pipeline does after a failed Resolve
	res, err := src.Resolve(ctx, "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	want := pipeline.Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("resolved (-want +got):\n%s", d)
	}
}
