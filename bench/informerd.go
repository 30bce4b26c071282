package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// daemon is an informerd process (testenv's) and a connection to it.
type daemon struct {
	*testenv.Daemon
	pid        int
	grpcAddr   string
	metricsURL string
	conn       *grpc.ClientConn
	client     pb.CacheServiceClient
	// kubeAPI is its Kubernetes API (--kube-api-address, plain HTTP on
	// loopback, no credentials: --auth-mode none), for unmodified
	// client-go; kubeconfig is a file that points at it, for children.
	kubeAPI    *rest.Config
	kubeconfig string
}

// podsConfig caches the pods of ns with a node index.
func podsConfig(ns string) string {
	return fmt.Sprintf(`resources:
  - resource: pods
    namespace: %s
    indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]
`, ns)
}

// podsConfigStrip is podsConfig with managedFields stripped or kept,
// whatever informerd's default (kept when it serves the Kubernetes API).
func podsConfigStrip(ns string, strip bool) string {
	return podsConfig(ns) + fmt.Sprintf("    transform: {stripManagedFields: %t}\n", strip)
}

// startInformerd runs bin with config against c and waits until it is ready.
// It serves gRPC and the Kubernetes API, its limits lifted (unlimited);
// extra flags come after -informerd-args, so that a scenario's own win.
func startInformerd(bin string, c *cluster, dir, config string, extra ...string) (*daemon, error) {
	cfgFile := filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		return nil, err
	}
	var kubeAddr string
	td, err := startDaemon(func() (*testenv.Daemon, error) {
		var err error
		if kubeAddr, err = testenv.FreeAddr(); err != nil {
			return nil, err
		}
		args := append([]string{"--kube-api-address=" + kubeAddr}, unlimited...)
		return testenv.StartDaemon(bin, cfgFile, c.kubeconfig, slices.Concat(args, informerdArgs, extra)...)
	})
	if err != nil {
		return nil, err
	}
	d := &daemon{Daemon: td, pid: td.PID(), grpcAddr: td.GRPCAddr, metricsURL: "http://" + td.MetricsAddr + "/metrics"}
	logf("informerd pid %d ready: gRPC %s, Kubernetes API http://%s, metrics and pprof on http://%s", d.pid, d.grpcAddr, kubeAddr, td.MetricsAddr)
	// As the harness's own clients: no rate limit of client-go's.
	d.kubeAPI = &rest.Config{Host: "http://" + kubeAddr, QPS: 5000, Burst: 10000}
	d.kubeconfig = filepath.Join(dir, fmt.Sprintf("informerd-%d.kubeconfig", d.pid))
	if err := writeKubeconfig(d.kubeconfig, d.kubeAPI.Host); err != nil {
		d.stop()
		return nil, err
	}
	if d.conn, err = dial(d.grpcAddr); err != nil {
		d.stop()
		return nil, err
	}
	d.client = pb.NewCacheServiceClient(d.conn)
	return d, nil
}

// informerdArgs are -informerd-args: flags added to every informerd the
// harness starts over kube-apiserver, after its own (a later flag wins), to
// measure a setting against the defaults.
var informerdArgs []string

// unlimited lifts informerd's limits: every benchmark client is the same
// anonymous identity.
var unlimited = []string{"--max-watches=100000", "--max-watches-per-identity=100000", "--watch-rate=1000000", "--watch-burst=1000000",
	"--list-rate=1000000", "--list-burst=1000000", "--max-streams-per-connection=100000"}

// startDaemon calls start, again (three tries in all) while it fails:
// testenv picks free ports that informerd binds only once it runs, and on
// a machine shared with other tests another process may bind one first
// (informerd then exits: "address already in use").
func startDaemon(start func() (*testenv.Daemon, error)) (*testenv.Daemon, error) {
	var err error
	for try := 1; try <= 3; try++ {
		var td *testenv.Daemon
		if td, err = start(); err == nil {
			return td, nil
		}
		logf("informerd did not start (try %d of 3): %v", try, err)
	}
	return nil, err
}

// startLeaf runs bin as a leaf informerd over the informerd at upstream
// (--upstream-informerd), with the configuration file cfgFile and env added
// to its environment, and waits until it has synced its part. It serves
// gRPC only (a leaf has no Kubernetes API) and has no kubeconfig.
func startLeaf(bin, cfgFile, upstream string, env ...string) (*daemon, error) {
	td, err := startDaemon(func() (*testenv.Daemon, error) {
		return testenv.StartDaemonEnv(bin, cfgFile, "", env, append([]string{"--upstream-informerd=" + upstream}, unlimited...)...)
	})
	if err != nil {
		return nil, err
	}
	return &daemon{Daemon: td, pid: td.PID(), grpcAddr: td.GRPCAddr, metricsURL: "http://" + td.MetricsAddr + "/metrics"}, nil
}

// writeKubeconfig writes a kubeconfig for server with no credentials: all
// an unmodified client needs to read from informerd with --auth-mode none.
func writeKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["informerd"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["informerd"] = &clientcmdapi.Context{Cluster: "informerd", AuthInfo: "anonymous"}
	cfg.CurrentContext = "informerd"
	return clientcmd.WriteToFile(*cfg, path)
}

// dial connects to a gRPC server on loopback as informerd's Go client
// package does (client.Dial: fixed flow-control windows, so no PING per
// message), with room for the largest List response, and opts after.
func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}, opts...)
	return client.Dial(client.Config{Address: addr}, opts...)
}

func (d *daemon) stop() {
	if d.conn != nil {
		d.conn.Close()
	}
	d.Stop()
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
