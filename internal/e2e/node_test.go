// Package e2e runs the example clients in other languages against a real
// informerd (caches + CacheService on loopback TCP) on the real control
// plane, and checks what they receive.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// serve runs informerd's caches and gRPC server on a loopback port.
func serve(t *testing.T, yaml string) (addr string, set *pipeline.Set) {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	set, err = pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, set)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv := server.New(set, server.Options{})
	pb.RegisterCacheServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); gs.Stop() })
	return lis.Addr().String(), set
}

type line struct {
	Step            string   `json:"step"`
	Names           []string `json:"names,omitempty"`
	Name            string   `json:"name,omitempty"`
	Kind            string   `json:"kind,omitempty"`
	Type            string   `json:"type,omitempty"`
	ResourceVersion string   `json:"resourceVersion,omitempty"`
}

// TestNodeClient runs examples/node/client.js: list, get, and a watch that
// drops its stream halfway and resumes from the last resourceVersion. Every
// change must arrive exactly once, in order.
func TestNodeClient(t *testing.T) {
	dir, err := filepath.Abs("../../examples/node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js")); err != nil {
		t.Fatalf("examples/node has no node_modules: run `make node-deps` (npm ci in examples/node): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: install Node.js 18 or newer: %v", err)
	}

	const ns = "node-client"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, name := range []string{"a", "b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addr, set := serve(t, fmt.Sprintf("resources: [{resource: configmaps, namespace: %s}]", ns))
	p, _ := set.Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "the cache to hold the two configmaps", func() bool {
		return p.Indexer().Stats().Objects == 2
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	const events = 6
	cmd := exec.CommandContext(wctx, node, filepath.Join(dir, "client.js"), addr, "configmaps", ns, fmt.Sprint(events))
	cmd.Env = append(os.Environ(), "RESUME_AFTER=3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []line
	sc := bufio.NewScanner(out)
	var want []line
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("client printed %q: %v", sc.Text(), err)
		}
		got = append(got, l)
		if l.Step == "get" {
			// The client is about to watch from its list's RV; change
			// things now, so some changes happen before it is connected.
			for i := range 3 {
				cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, line{Step: "event", Type: "ADDED", Name: cm.Name, Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
			}
			cm, err := cms.Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"k": "v"}
			if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want = append(want, line{Step: "event", Type: "MODIFIED", Name: "a", Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
			for i := 3; i < 5; i++ {
				cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, line{Step: "event", Type: "ADDED", Name: cm.Name, Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client: %v\n%s", err, stderr.String())
	}
	if len(got) < 2 || got[0].Step != "list" || !cmp.Equal(got[0].Names, []string{"a", "b"}) || got[1].Step != "get" || got[1].Kind != "ConfigMap" {
		t.Fatalf("list/get lines = %+v", got)
	}
	var evs []line
	resumed := false
	for _, l := range got[2:] {
		switch l.Step {
		case "event":
			evs = append(evs, l)
		case "resume":
			resumed = true
		}
	}
	if !resumed {
		t.Error("the client never resumed its watch")
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events the Node client received (-want +got):\n%s", diff)
	}
}
