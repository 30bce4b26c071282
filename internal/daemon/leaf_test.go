package daemon_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// TestLeafWaitsForItsUpstream starts a leaf informerd (--upstream-informerd)
// before its upstream exists: it starts, /readyz says what it waits for,
// and once the root appears the leaf syncs, serves the root's objects with
// the root's resourceVersions and reports SERVING.
func TestLeafWaitsForItsUpstream(t *testing.T) {
	namespaceWithConfigMap(t, "leaf")
	rootAddr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	leafOpts := daemon.NewOptions()
	leafOpts.ConfigPath = testenv.WriteFile(t, dir, "leaf.yaml", []byte("resources:\n  - resource: configmaps\n    upstreamSelector: {namespace: leaf}\n"))
	leafOpts.Upstream = client.Config{Address: rootAddr}
	leafOpts.GRPCAddress, leafOpts.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	leafOpts.ShutdownTimeout = 5 * time.Second
	leaf, _ := start(t, leafOpts)

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var body string
	testenv.Eventually(t, 30*time.Second, "/readyz to name the upstream it waits for", func() bool {
		var code int
		code, body = get(leaf.MetricsURL() + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "upstream informerd at "+rootAddr)
	})
	t.Logf("/readyz while the upstream is down: %s", body)

	rootOpts := daemon.NewOptions()
	rootOpts.Config = parse(t, "resources:\n  - resource: configmaps\n")
	rootOpts.RestConfig = env.Config
	rootOpts.GRPCAddress, rootOpts.MetricsAddress = rootAddr, "127.0.0.1:0"
	rootOpts.ShutdownTimeout = 5 * time.Second
	start(t, rootOpts)

	testenv.Eventually(t, time.Minute, "the leaf's /readyz to answer 200 once the root serves", func() bool {
		code, _ := get(leaf.MetricsURL() + "/readyz")
		return code == http.StatusOK
	})
	ctx := context.Background()
	conn, err := client.Dial(client.Config{Address: leaf.GRPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the leaf's gRPC health: %v %v, want SERVING", resp, err)
	}
	rconn, err := client.Dial(client.Config{Address: rootAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer rconn.Close()
	want, err := pb.NewCacheServiceClient(rconn).Get(ctx, &pb.GetRequest{Resource: "configmaps", Namespace: "leaf", Name: "cm"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := pb.NewCacheServiceClient(conn).Get(ctx, &pb.GetRequest{Resource: "configmaps", Namespace: "leaf", Name: "cm"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetObject().GetResourceVersion() != want.GetObject().GetResourceVersion() || string(got.GetObject().GetJson()) != string(want.GetObject().GetJson()) {
		t.Errorf("the leaf's cm = %s at %s, the root's %s at %s", got.GetObject().GetJson(), got.GetObject().GetResourceVersion(), want.GetObject().GetJson(), want.GetObject().GetResourceVersion())
	}
	list, err := pb.NewCacheServiceClient(conn).List(ctx, &pb.ListRequest{Resource: "configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.GetObjects() {
		if o.GetNamespace() != "leaf" {
			t.Errorf("the leaf holds %s/%s, outside its part (namespace leaf)", o.GetNamespace(), o.GetName())
		}
	}
}
