package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerd/informerd/internal/testenv"
)

// capacityDaemon is the capacity scenario's informerd: the scenario's
// namespace only, with --state-dir, so that it restarts warm, and its
// Kubernetes API over TLS with a certificate it issues itself
// (--kube-api-tls-self-signed), so that client-go speaks HTTP/2 to it:
// every informer of a process on one connection.
type capacityDaemon struct {
	*testenv.Daemon
	kubeAddr   string
	kubeconfig string // the Kubernetes API over TLS, no credentials (--auth-mode none)
}

// startCapacityDaemon starts it and waits until it is ready.
func startCapacityDaemon(b *bench, ns string) (*capacityDaemon, error) {
	dir := filepath.Join(b.dir, "capacity")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(cfgFile, []byte(podsConfig(ns)), 0o600); err != nil {
		return nil, err
	}
	ca := filepath.Join(dir, "ca.crt")
	d := &capacityDaemon{kubeconfig: filepath.Join(dir, "kubeapi.kubeconfig")}
	td, err := startDaemon(func() (*testenv.Daemon, error) {
		var err error
		if d.kubeAddr, err = testenv.FreeAddr(); err != nil {
			return nil, err
		}
		args := append([]string{"--kube-api-address=" + d.kubeAddr, "--kube-api-tls-self-signed=" + ca,
			"--state-dir=" + filepath.Join(dir, "state")}, unlimited...)
		return testenv.StartDaemon(b.informerdBin, cfgFile, b.cluster.kubeconfig, append(args, informerdArgs...)...)
	})
	if err != nil {
		return nil, err
	}
	d.Daemon = td
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["informerd"] = &clientcmdapi.Cluster{Server: "https://" + d.kubeAddr, CertificateAuthority: ca}
	cfg.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["informerd"] = &clientcmdapi.Context{Cluster: "informerd", AuthInfo: "anonymous"}
	cfg.CurrentContext = "informerd"
	if err := clientcmd.WriteToFile(*cfg, d.kubeconfig); err != nil {
		d.Stop()
		return nil, err
	}
	logf("capacity informerd pid %d ready: gRPC %s, Kubernetes API https://%s (HTTP/2), state in %s", d.PID(), d.GRPCAddr, d.kubeAddr, dir)
	return d, nil
}

func (d *capacityDaemon) metricsURL() string { return "http://" + d.MetricsAddr + "/metrics" }

// settled waits until informerd's cooling loop is done with its synced
// cache (--cache-compression): most objects compressed, or the compressed
// count still for 5 s (compression off, or a cache under its least size).
// The per-watcher heap is a difference of two readings: compression going
// on between them would be charged to the watchers, as less than nothing.
func (d *capacityDaemon) settled(ctx context.Context, objects int) error {
	deadline := time.Now().Add(scaleCooled)
	last, still := -1.0, time.Now()
	for {
		s, err := scrape(ctx, d.metricsURL())
		if err != nil {
			return err
		}
		cold := s.sum("informerd_cache_stored_objects", map[string]string{"state": "cold"})
		if cold != last {
			last, still = cold, time.Now()
		}
		switch {
		case cold >= 0.9*float64(objects), time.Since(still) >= 5*time.Second:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("informerd's cache not settled %v after start: %.0f of %d objects compressed, and rising", scaleCooled, cold, objects)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// serverFootprint is a server process's memory and goroutines at one moment.
type serverFootprint struct {
	heap, rss, goroutines float64
}

// perWatcher is what each of n watchers added from before to after.
func (after serverFootprint) perWatcher(before serverFootprint, n int) serverFootprint {
	return serverFootprint{heap: (after.heap - before.heap) / float64(n), rss: (after.rss - before.rss) / float64(n),
		goroutines: (after.goroutines - before.goroutines) / float64(n)}
}

// heapLive is the heap live after a garbage collection: the runtime's
// go_gc_heap_live_bytes where the process exports it, else
// go_memstats_heap_alloc_bytes read right after one.
func heapLive(s samples) float64 {
	if v := s.sum("go_gc_heap_live_bytes", nil); v > 0 {
		return v
	}
	return s.sum("go_memstats_heap_alloc_bytes", nil)
}

// collections is how many garbage collections a footprint forces: the
// second frees what the first left in sync.Pools' victim caches (pooled
// gzip writers and buffers, which belong to no watcher).
const collections = 2

// footprint forces garbage collections in informerd (pprof's heap profile
// with gc=1), then reads its live heap and goroutines from its metrics and
// its RSS from /proc.
func (d *capacityDaemon) footprint(ctx context.Context) (serverFootprint, error) {
	for range collections {
		resp, err := http.Get("http://" + d.MetricsAddr + "/debug/pprof/heap?gc=1")
		if err != nil {
			return serverFootprint{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s, err := scrape(ctx, d.metricsURL())
	if err != nil {
		return serverFootprint{}, err
	}
	rss, err := rssBytes(d.PID())
	return serverFootprint{heap: heapLive(s), rss: float64(rss), goroutines: s.sum("go_goroutines", nil)}, err
}

// apiFootprint is footprint for kube-apiserver (its --profiling is on by
// default; the harness's credentials are admin).
func apiFootprint(ctx context.Context, c *cluster) (serverFootprint, error) {
	for range collections {
		if _, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx); err != nil {
			return serverFootprint{}, fmt.Errorf("kube-apiserver's heap profile: %w", err)
		}
	}
	s, err := c.apiMetrics(ctx)
	if err != nil {
		return serverFootprint{}, err
	}
	rss, err := rssBytes(c.apiPID)
	return serverFootprint{heap: heapLive(s), rss: float64(rss), goroutines: s.sum("go_goroutines", nil)}, err
}

// watchersOn counts, for each node, the watchers of n on it (watcher i on
// node i%nodes).
func watchersOn(n, nodes int) map[string]int {
	out := map[string]int{}
	for i := range n {
		out[nodeName(i, nodes)]++
	}
	return out
}

// eventsDue is how many events the writes owe n watchers.
func eventsDue(writes []podWrite, n, nodes int) int64 {
	on := watchersOn(n, nodes)
	var due int64
	for _, w := range writes {
		due += int64(on[w.node])
	}
	return due
}

// pprofGet fetches a profile from a server's /debug/pprof: kind
// "profile" (CPU) over seconds, or "heap" (in use, as of the last garbage
// collection) with seconds 0.
type pprofGet func(kind string, seconds int) (io.ReadCloser, error)

// pprof is informerd's pprofGet.
func (d *capacityDaemon) pprof(kind string, seconds int) (io.ReadCloser, error) {
	return pprofHTTP("http://"+d.MetricsAddr+"/metrics")(kind, seconds)
}

// apiPprof is kube-apiserver's pprofGet.
func apiPprof(ctx context.Context, c *cluster) pprofGet {
	return func(kind string, seconds int) (io.ReadCloser, error) {
		req := c.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/" + kind)
		if seconds > 0 {
			req = req.Param("seconds", strconv.Itoa(seconds))
		}
		return req.Stream(ctx)
	}
}

// saveProfile, with -profile and in the first run, writes a server's
// profile of kind to <name>-<kind>.pprof in the profile folder,
// in the background; the returned func waits for it. Otherwise it does
// nothing.
func saveProfile(b *bench, run int, name, kind string, seconds int, get pprofGet) (wait func()) {
	if b.profileDir == "" || run > 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := filepath.Join(b.profileDir, fmt.Sprintf("%s-%s.pprof", name, kind))
		data, err := readProfile(func(s int) (io.ReadCloser, error) { return get(kind, s) }, seconds)
		if err == nil {
			err = os.MkdirAll(b.profileDir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			logf("%s profile of %s: %v", kind, name, err)
			return
		}
		logf("wrote %s", path)
	}()
	return func() { <-done }
}

// warm reads every pod of ns once, as an informer's first sync does (a
// watch with sendInitialEvents, in protobuf, up to the bookmark that ends
// the initial events), and closes the watch. Run before a footprint's
// "before", it puts there what a server keeps per object once any client
// has read it (for informerd: the objects its state holds off the heap,
// decoded, and their protobuf forms), which the watchers would otherwise
// be charged with.
func warm(ctx context.Context, cfg *rest.Config, ns string) error {
	// Tried again for a while: the read may come as a server (informerd
	// just restarted) still refuses some requests.
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = warmOnce(ctx, cfg, ns); err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
	}
}

func warmOnce(ctx context.Context, cfg *rest.Config, ns string) error {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	yes := true
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return fmt.Errorf("warm-up watch: %w", err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Bookmark {
			continue
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			return nil
		}
	}
	return fmt.Errorf("warm-up watch: ended before its initial events did: %w", ctx.Err())
}

// ownDelay scrapes informerd's delivery delay histogram
// (informerd_watch_delivery_delay_seconds: from the cache to the watch
// stream) now, and returns what gives the p99 in ms of the observations
// made until it is called; -1 when either scrape fails or none was made.
// It is interpolated within the histogram's buckets (factor 4 apart), as
// Prometheus' histogram_quantile does, so it is coarse: it tells the
// delay informerd adds from the delay the machine and the clients add.
func ownDelay(ctx context.Context, metricsURL string) func() float64 {
	const name = "informerd_watch_delivery_delay_seconds_bucket"
	before, err := scrape(ctx, metricsURL)
	return func() float64 {
		after, err2 := scrape(ctx, metricsURL)
		if err != nil || err2 != nil {
			return -1
		}
		b, a := before.buckets(name), after.buckets(name)
		var bounds []float64
		for le := range a {
			bounds = append(bounds, le)
		}
		slices.Sort(bounds)
		counts := make([]float64, len(bounds))
		for i, le := range bounds {
			counts[i] = a[le] - b[le]
		}
		return 1000 * bucketQuantile(0.99, bounds, counts)
	}
}

// bucketQuantile is the q quantile of cumulative bucket counts by upper
// bound (the last +Inf), interpolated linearly within its bucket; -1 when
// there is no observation.
func bucketQuantile(q float64, bounds, counts []float64) float64 {
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		return -1
	}
	rank := q * counts[len(counts)-1]
	lower, below := 0.0, 0.0
	for i, c := range counts {
		if c >= rank {
			if math.IsInf(bounds[i], 1) {
				return lower // beyond the largest bound: the bound
			}
			return lower + (bounds[i]-lower)*(rank-below)/max(c-below, 1)
		}
		lower, below = bounds[i], c
	}
	return lower
}
