package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/backoff"
	"github.com/informerd/informerd/pkg/client"
)

// The herd scenario's columns.
const (
	colHerdP0     = "reconnect p0 s"
	colHerdP50    = "reconnect p50 s"
	colHerdP99    = "reconnect p99 s"
	colHerdMax    = "reconnect max s"
	colHerdPeak   = "peak reconnects per 100 ms"
	colHerdBack   = "watchers back"
	colHerdDown   = "informerd down s"
	herdBucket    = 100 * time.Millisecond
	herdLimit     = time.Minute // the longest a run waits for the watchers to be back
	herdFixedWait = time.Second // the contrast's retry
)

// herdClients are the two kinds of watcher the scenario compares.
var herdClients = []struct {
	name    string
	noRetry bool // a fixed retry of the harness's instead of pkg/client's backoff
}{
	{name: "pkg/client (full jitter)"},
	{name: "fixed 1 s retry (contrast)", noRetry: true},
}

// herd is scenario 9 (issue 36): W watchers built on pkg/client's
// ListWatch, each watching one node's pods and resuming from its last
// resourceVersion, across a restart of the informerd they watch (SIGTERM,
// then started again at once on its --state-dir, so it serves as soon as
// it runs). It measures when each watcher is admitted again, from the
// restarted process's start: the spread of the reconnect herd.
func herd(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "herd",
		Title:   "9. Reconnect herd after a restart",
		Plot:    colHerdPeak,
		Columns: []string{colHerdP0, colHerdP50, colHerdP99, colHerdMax, colHerdPeak, colHerdBack, colHerdDown},
	}
	t := newTable()
	config := filepath.Join(b.dir, "herd.yaml")
	if err := os.WriteFile(config, []byte(podsConfig(b.ns)), 0o600); err != nil {
		return s, err
	}
	stateDir := filepath.Join(b.dir, "herd-state")
	defer os.RemoveAll(stateDir)
	d, err := newRestartDaemon(b.informerdBin, config, b.cluster.kubeconfig, stateDir)
	if err != nil {
		return s, err
	}
	defer d.kill()
	if err := d.start(); err != nil {
		return s, err
	}
	if _, err := d.waitServing(ctx, 5*time.Minute); err != nil {
		return s, err
	}
	for run := range b.runs {
		for _, hc := range herdClients {
			m, err := herdRun(ctx, b, d, hc.noRetry)
			if err != nil {
				return s, fmt.Errorf("%s, run %d: %w", hc.name, run+1, err)
			}
			labels := []Label{{"watchers", strconv.Itoa(b.herdN)}, {"client", hc.name}}
			t.add(labels, colHerdP0, m.p0)
			t.add(labels, colHerdP50, m.p50)
			t.add(labels, colHerdP99, m.p99)
			t.add(labels, colHerdMax, m.max)
			t.add(labels, colHerdPeak, float64(m.peak))
			t.add(labels, colHerdBack, float64(m.back))
			t.add(labels, colHerdDown, m.down)
			logf("run %d, %s: %d of %d watchers back; reconnect p0 %.2f s, p50 %.2f s, p99 %.2f s, max %.2f s after informerd's start; peak %d reconnects in 100 ms; informerd down %.2f s",
				run+1, hc.name, m.back, b.herdN, m.p0, m.p50, m.p99, m.max, m.peak, m.down)
		}
	}
	s.Rows = t.rows()
	s.Notes = append(s.Notes,
		fmt.Sprintf("Each run, for each kind of client: %d watchers, watcher i on the pods of node i%%%d (by index), %d to a connection (pkg/client's Dial), each a pkg/client ListWatch whose Watch it calls from its last resourceVersion again whenever a watch ends; once all are admitted and %v have passed (longer than pkg/client's healthy period, %v, so each backoff starts from its base), informerd is stopped with SIGTERM (its streams end with UNAVAILABLE) and started again at once on its --state-dir, serving its restored cache as soon as it runs.",
			b.herdN, b.nodes, watchesPerConn, herdSettle, backoff.Default.ResetAfter),
		"Reconnect: from the restarted process's start to each watcher's next admission (the Watch's response headers; pkg/client opens a watch broken before its first event again itself, and that admission counts). p0/p50/p99/max over the watchers back; peak: the most admissions in one 100 ms bucket from the process's start; watchers back: admitted again within a minute.",
		fmt.Sprintf("pkg/client (full jitter): the ListWatch's own retries, each a uniformly random wait in [0, min(30 s, 1 s·2^n)) (Options.Backoff), and its connection's, grpc-go's reconnect with a jitter of 1 (docs/reliability.md). Fixed 1 s retry (contrast): the ListWatch with NoRetry and the harness retrying every watcher %v after each refusal or end, as a naive client does; its connections are pkg/client's, already jittered.", herdFixedWait),
		"informerd down: from SIGTERM to the new process's start (the old one's graceful stop).",
		"All processes (etcd, kube-apiserver, informerd, the harness and its watchers) share the machine's cores; times are noisy when the machine is shared.")
	return s, nil
}

// herdSettle is how long the watchers stay admitted before the restart:
// longer than pkg/client's healthy period.
var herdSettle = backoff.Default.ResetAfter + time.Second

// herdMeasure is one run's figures.
type herdMeasure struct {
	p0, p50, p99, max float64 // seconds from the restarted process's start
	peak, back        int
	down              float64
}

// herdRun opens the watchers, restarts informerd and measures the herd.
func herdRun(ctx context.Context, b *bench, d *restartDaemon, noRetry bool) (herdMeasure, error) {
	var m herdMeasure
	rv, err := d.resourceVersion(ctx)
	if err != nil {
		return m, err
	}
	h, err := startHerd(ctx, d.grpcAddr, b.herdN, b.nodes, rv, noRetry)
	if err != nil {
		return m, err
	}
	defer h.close()
	time.Sleep(herdSettle)
	h.mark()
	stopped := time.Now()
	if err := d.stop(); err != nil {
		return m, err
	}
	if err := d.start(); err != nil {
		return m, err
	}
	started := d.started
	m.down = started.Sub(stopped).Seconds()
	if _, err := d.waitServing(ctx, 5*time.Minute); err != nil {
		return m, err
	}
	deadline := time.Now().Add(herdLimit)
	for h.backCount() < b.herdN && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if err := h.failed(); err != nil {
		return m, err
	}
	delays := h.delays(started)
	m.back = len(delays)
	if m.back == 0 {
		return m, fmt.Errorf("no watcher was admitted again within %v of informerd's restart", herdLimit)
	}
	slices.Sort(delays)
	sec := func(d time.Duration) float64 { return d.Seconds() }
	m.p0, m.max = sec(delays[0]), sec(delays[len(delays)-1])
	m.p50 = sec(delays[len(delays)/2])
	m.p99 = sec(delays[min(len(delays)-1, len(delays)*99/100)])
	buckets := map[int64]int{}
	for _, d := range delays {
		b := int64(d / herdBucket)
		buckets[b]++
		m.peak = max(m.peak, buckets[b])
	}
	return m, nil
}

// herdWatchers are the scenario's watchers. Their methods may be called
// concurrently.
type herdWatchers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn

	mu     sync.Mutex
	marked bool
	admits []time.Time // each watcher's first admission since mark
	err    error       // the first failure that is not a restart's
}

// startHerd opens n watchers on informerd at addr, watcher i on node
// i%nodes from resourceVersion rv, and returns once each is admitted.
func startHerd(ctx context.Context, addr string, n, nodes int, rv string, noRetry bool) (*herdWatchers, error) {
	ctx, cancel := context.WithCancel(ctx)
	h := &herdWatchers{cancel: cancel, admits: make([]time.Time, n)}
	first := make(chan int, n)
	var c pb.CacheServiceClient
	for i := range n {
		if i%watchesPerConn == 0 {
			conn, err := dial(addr)
			if err != nil {
				h.close()
				return nil, err
			}
			h.conns = append(h.conns, conn)
			c = pb.NewCacheServiceClient(conn)
		}
		timed := admissions{CacheServiceClient: c, admitted: func() { h.admitted(i, first) }}
		lw, err := client.NewListWatch(timed, &corev1.Pod{}, client.Options{Resource: "pods", Index: "node", IndexValues: []string{nodeName(i, nodes)}, NoRetry: noRetry})
		if err != nil {
			h.close()
			return nil, err
		}
		h.wg.Go(func() { h.run(ctx, lw, rv, noRetry) })
	}
	for range n {
		select {
		case <-first:
		case <-time.After(time.Minute):
			h.close()
			return nil, fmt.Errorf("%d watchers not admitted within a minute", n)
		}
	}
	return h, nil
}

// run is one watcher's life: watch from rv, and again from the last
// resourceVersion whenever the watch ends. pkg/client's ListWatch waits
// and retries itself; with noRetry the watcher retries herdFixedWait after
// each refusal, as a naive client does. A resourceVersion refused as too
// old fails the scenario: a restart from --state-dir keeps it valid.
func (h *herdWatchers) run(ctx context.Context, lw *client.ListWatch, rv string, noRetry bool) {
	for ctx.Err() == nil {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err == nil {
			var last string
			last, err = follow(w)
			if last != "" {
				rv = last
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case apierrors.IsResourceExpired(err):
			h.fail(fmt.Errorf("a watcher's resourceVersion %s was refused (OUT_OF_RANGE) after the restart: %w", rv, err))
			return
		case err != nil && (noRetry || !apierrors.IsTooManyRequests(err)):
			// A refusal for the naive client; for either, an error
			// other than a 429 (a watch cut as informerd stops), after
			// which client-go would back off too.
			select {
			case <-ctx.Done():
			case <-time.After(herdFixedWait):
			}
		}
	}
}

// follow reads a watch until it ends and returns the last resourceVersion
// and the error it ended with, if any.
func follow(w watch.Interface) (last string, err error) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return last, apierrors.FromObject(ev.Object)
		}
		if m, merr := meta.Accessor(ev.Object); merr == nil && m.GetResourceVersion() != "" {
			last = m.GetResourceVersion()
		}
	}
	return last, nil
}

func (h *herdWatchers) admitted(i int, first chan<- int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.marked {
		select {
		case first <- i:
		default:
		}
		return
	}
	if h.admits[i].IsZero() {
		h.admits[i] = time.Now()
	}
}

func (h *herdWatchers) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *herdWatchers) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// mark starts recording admissions: the restart follows.
func (h *herdWatchers) mark() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.marked = true
}

func (h *herdWatchers) backCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, t := range h.admits {
		if !t.IsZero() {
			n++
		}
	}
	return n
}

// delays are the admissions since mark, from since.
func (h *herdWatchers) delays(since time.Time) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	for _, t := range h.admits {
		if !t.IsZero() {
			out = append(out, t.Sub(since))
		}
	}
	return out
}

func (h *herdWatchers) close() {
	h.cancel()
	h.wg.Wait()
	for _, c := range h.conns {
		c.Close()
	}
}

// admissions is a CacheServiceClient that tells admitted of each Watch
// informerd admits: when the stream's response headers arrive, as
// pkg/client waits for them.
type admissions struct {
	pb.CacheServiceClient
	admitted func()
}

func (a admissions) Watch(ctx context.Context, in *pb.WatchRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchResponse], error) {
	s, err := a.CacheServiceClient.Watch(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return admittedStream{ServerStreamingClient: s, admitted: a.admitted}, nil
}

type admittedStream struct {
	grpc.ServerStreamingClient[pb.WatchResponse]
	admitted func()
}

func (s admittedStream) Header() (metadata.MD, error) {
	md, err := s.ServerStreamingClient.Header()
	if err == nil && md != nil {
		s.admitted()
	}
	return md, err
}
