package daemon_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// TestLeafRestartsFromItsState stops a leaf (--upstream-informerd) with a
// --state-dir, changes objects and starts it again: it resumes its watch
// of the root from the saved resourceVersion instead of listing its part
// (one list in all, its first), and a client of the leaf resumes from its
// resourceVersion of before the restart and receives exactly the changes
// (a leaf that started cold would answer OUT_OF_RANGE: its history would
// begin at its new list). Started again naming its upstream otherwise, the
// leaf sets the state aside and lists: a leaf's state belongs to its
// upstream.
func TestLeafRestartsFromItsState(t *testing.T) {
	ns := fmt.Sprintf("leaf-state-%d", time.Now().UnixNano()%1e6)
	kube := namespaceWithConfigMap(t, ns)
	ctx := context.Background()

	rootOpts := daemon.NewOptions()
	rootOpts.Config = parse(t, "resources:\n  - resource: configmaps\n")
	rootOpts.RestConfig = env.Config
	rootOpts.GRPCAddress, rootOpts.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	rootOpts.ShutdownTimeout = 5 * time.Second
	root, _ := start(t, rootOpts)

	dir := t.TempDir()
	leafOpts := daemon.NewOptions()
	leafOpts.ConfigPath = testenv.WriteFile(t, dir, "leaf.yaml", []byte("resources:\n  - resource: configmaps\n    upstreamSelector: {namespace: "+ns+"}\n"))
	leafOpts.Upstream = client.Config{Address: root.GRPCAddr()}
	leafOpts.StateDir = filepath.Join(dir, "state")
	leafOpts.StateFlushInterval = 100 * time.Millisecond
	leafOpts.GRPCAddress, leafOpts.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	leafOpts.ShutdownTimeout = 5 * time.Second

	runLeaf := func(o daemon.Options) (*daemon.Daemon, pb.CacheServiceClient, func() error) {
		t.Helper()
		d, stop := start(t, o)
		conn, err := grpc.NewClient(d.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return d, pb.NewCacheServiceClient(conn), stop
	}
	list := func(c pb.CacheServiceClient) (*pb.ListResponse, error) {
		return c.List(ctx, &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: ns}})
	}
	relists := func(d *daemon.Daemon) int64 {
		t.Helper()
		if u := readyz(t, d).Resources[0].Upstream; u != nil {
			return u.Relists
		}
		return -1
	}

	leaf1, c1, stop1 := runLeaf(leafOpts)
	var clientRV string
	testenv.Eventually(t, time.Minute, "the leaf to hold the root's configmap", func() bool {
		l, err := list(c1)
		if err != nil || len(l.GetObjects()) != 1 {
			return false
		}
		clientRV = l.GetResourceVersion()
		return true
	})
	testenv.Eventually(t, time.Minute, "the leaf to write its state", func() bool {
		s := readyz(t, leaf1).Resources[0].State
		return s != nil && s.WrittenResourceVersion != "" && s.LagEvents == 0
	})
	// The counter the restarted leaf is held to counts a leaf's lists:
	// its first start listed its part once.
	if n := relists(leaf1); n != 1 {
		t.Fatalf("the leaf listed %d times at its first start, want 1", n)
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}

	// While the leaf is down: an update and a create.
	cms := kube.CoreV1().ConfigMaps(ns)
	updated, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	leaf2, c2, stop2 := runLeaf(leafOpts)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Until the root has confirmed the restored cache, a watch is
	// refused as UNAVAILABLE, which clients retry.
	var stream grpc.ServerStreamingClient[pb.WatchResponse]
	var first *pb.WatchResponse
	testenv.Eventually(t, time.Minute, "a watch of the restarted leaf to be admitted", func() bool {
		stream, err = c2.Watch(wctx, &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: ns}, ResourceVersion: clientRV})
		if err == nil {
			first, err = stream.Recv()
		}
		return status.Code(err) != codes.Unavailable
	})
	var got []string
	for ev := first; ; {
		if err != nil {
			t.Fatalf("a watch of the restarted leaf from %s, its resourceVersion before the restart, after %v: %v (OUT_OF_RANGE: the leaf started cold)", clientRV, got, err)
		}
		got = append(got, strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")+" "+ev.GetObject().GetName()+"@"+ev.GetObject().GetResourceVersion())
		if len(got) == 2 {
			break
		}
		ev, err = stream.Recv()
	}
	want := []string{"MODIFIED cm@" + updated.ResourceVersion, "ADDED cm2@" + created.ResourceVersion}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the restarted leaf sent %v, want exactly %v", got, want)
	}
	if n := relists(leaf2); n != 0 {
		t.Errorf("the restarted leaf listed %d times, want 0: it resumes from its state's resourceVersion", n)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}

	// The same root under another name is another upstream for the state.
	host, port, _ := strings.Cut(root.GRPCAddr(), ":")
	if host != "127.0.0.1" {
		t.Fatalf("the root listens on %s, want 127.0.0.1", root.GRPCAddr())
	}
	renamed := leafOpts
	renamed.Upstream = client.Config{Address: "localhost:" + port}
	leaf3, c3, _ := runLeaf(renamed)
	testenv.Eventually(t, time.Minute, "the leaf started with another upstream to list", func() bool {
		l, err := list(c3)
		return err == nil && len(l.GetObjects()) == 2
	})
	r := readyz(t, leaf3).Resources[0]
	if r.State == nil || !strings.Contains(r.State.SetAside, "informerd://127.0.0.1:"+port) {
		t.Errorf("/readyz of the leaf with another upstream: state %+v, want it set aside for naming informerd://127.0.0.1:%s", r.State, port)
	}
	if n := relists(leaf3); n != 1 {
		t.Errorf("the leaf with another upstream listed %d times, want 1 (cold)", n)
	}
	s, err := c3.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: ns}, ResourceVersion: clientRV})
	if err == nil {
		_, err = s.Recv() // the refusal comes on the stream
	}
	if status.Code(err) != codes.OutOfRange {
		t.Errorf("a watch of the cold leaf from %s: %v, want OUT_OF_RANGE (its history begins at its list)", clientRV, err)
	}
}
