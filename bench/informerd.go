package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// daemon is an informerd process.
type daemon struct {
	cmd        *exec.Cmd
	pid        int
	grpcAddr   string
	metricsURL string
	conn       *grpc.ClientConn
	client     pb.CacheServiceClient
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// podsConfig caches the pods of ns with a node index.
func podsConfig(ns string) string {
	return fmt.Sprintf(`resources:
  - resource: pods
    namespace: %s
    indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]
`, ns)
}

// startInformerd runs bin with config against c and waits until it is ready.
// Limits are lifted: every benchmark client is the same anonymous identity.
func startInformerd(ctx context.Context, bin string, c *cluster, dir, config string) (*daemon, error) {
	cfgFile := filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		return nil, err
	}
	grpcAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config="+cfgFile, "--kubeconfig="+c.kubeconfig,
		"--grpc-address="+grpcAddr, "--metrics-address="+metricsAddr, "--log-level=warn", "--enable-profiling",
		"--max-watches=100000", "--max-watches-per-identity=100000", "--watch-rate=1000000", "--watch-burst=1000000",
		"--max-streams-per-connection=100000")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start informerd: %w", err)
	}
	d := &daemon{cmd: cmd, pid: cmd.Process.Pid, grpcAddr: grpcAddr, metricsURL: "http://" + metricsAddr + "/metrics"}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			d.stop()
			return nil, fmt.Errorf("informerd not ready after 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("informerd pid %d ready: gRPC %s, metrics and pprof on http://%s", d.pid, grpcAddr, metricsAddr)
	if d.conn, err = dial(grpcAddr); err != nil {
		d.stop()
		return nil, err
	}
	d.client = pb.NewCacheServiceClient(d.conn)
	return d, nil
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

func (d *daemon) stop() {
	if d.conn != nil {
		d.conn.Close()
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

// liveHeap forces a GC (pprof's heap profile with gc=1) and returns the
// heap live after it, from go_gc_heap_live_bytes.
func (d *daemon) liveHeap(ctx context.Context) (float64, error) {
	base := strings.TrimSuffix(d.metricsURL, "/metrics")
	resp, err := http.Get(base + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s, err := scrape(ctx, d.metricsURL)
	if err != nil {
		return 0, err
	}
	return s.sum("go_gc_heap_live_bytes", nil), nil
}
