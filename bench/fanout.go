package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// receipt is one event a watcher received: its resourceVersion and when.
type receipt struct {
	rv string
	at time.Time
}

// watchers are N streams, each recording what it receives.
type watchers struct {
	mu       sync.Mutex
	got      [][]receipt
	received atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	conns    []*grpc.ClientConn
	failure  atomic.Pointer[error] // the first stream that ended early
	ended    atomic.Int64          // streams that ended early
}

// fail records that watcher i's stream ended with err before the
// watchers were closed: its later events would go uncounted.
func (w *watchers) fail(i int, err error) {
	w.ended.Add(1)
	err = fmt.Errorf("watcher %d's stream ended: %w", i, err)
	w.failure.CompareAndSwap(nil, &err)
}

// failed returns the first stream's early end, or nil.
func (w *watchers) failed() error {
	if err := w.failure.Load(); err != nil {
		return *err
	}
	return nil
}

func (w *watchers) record(i int, rv string) {
	now := time.Now()
	w.received.Add(1)
	w.mu.Lock()
	w.got[i] = append(w.got[i], receipt{rv, now})
	w.mu.Unlock()
}

// take returns and forgets what was received so far.
func (w *watchers) take() [][]receipt {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = make([][]receipt, len(out))
	w.received.Store(0)
	return out
}

// close ends the streams and waits for their readers, then closes the
// connections they used.
func (w *watchers) close() {
	w.cancel()
	w.wg.Wait()
	for _, c := range w.conns {
		c.Close()
	}
}

// watchesPerConn is how many of the watchers share one connection, to
// informerd, the floor and kube-apiserver alike: HTTP/2 caps the streams
// of one connection at kube-apiserver, a real fleet of clients has many
// connections, and a connection's writer batches the frames of all its
// streams, so the servers are compared with the same number.
const watchesPerConn = 100

// grpcWatchers opens Watch-by-index streams on informerd or the floor at
// addr: watcher i of n on node i%nodes, for each i that pick selects (nil:
// all), over a connection per watchesPerConn streams dialed with opts
// after dial's, and returns once every stream is admitted. Each watcher
// sleeps pause after each event. With fields not nil, the watches ask for
// only those fields of each pod (empty: the whole pod) and allow
// bookmarks; a bookmark is not recorded as an event.
func grpcWatchers(ctx context.Context, addr string, n, nodes int, pick func(i int) bool, pause time.Duration, fields []string, opts ...grpc.DialOption) (*watchers, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchers{got: make([][]receipt, n), cancel: cancel}
	var client pb.CacheServiceClient
	opened := 0
	for i := range n {
		if pick != nil && !pick(i) {
			continue
		}
		var err error
		if opened%watchesPerConn == 0 {
			var conn *grpc.ClientConn
			if conn, err = dial(addr, opts...); err == nil {
				w.conns = append(w.conns, conn)
				client = pb.NewCacheServiceClient(conn)
			}
		}
		opened++
		var stream grpc.ServerStreamingClient[pb.WatchResponse]
		if err == nil {
			sel := &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{nodeName(i, nodes)}}}
			req := &pb.WatchRequest{Resource: "pods", Selector: sel}
			if fields != nil {
				req.Fields, req.AllowBookmarks = &fieldmaskpb.FieldMask{Paths: fields}, true
			}
			stream, err = client.Watch(ctx, req)
		}
		if err == nil {
			_, err = stream.Header()
		}
		if err != nil {
			w.close()
			return nil, fmt.Errorf("watcher %d: %w", i, err)
		}
		w.wg.Go(func() {
			for {
				ev, err := stream.Recv()
				if err != nil {
					if ctx.Err() == nil {
						w.fail(i, err)
					}
					return
				}
				if ev.GetType() == pb.EventType_EVENT_TYPE_BOOKMARK {
					continue
				}
				w.record(i, ev.GetResourceVersion())
				if pause > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(pause):
					}
				}
			}
		})
	}
	return w, nil
}

// apiWatchers opens n watches on kube-apiserver, watcher i with
// fieldSelector spec.nodeName of node i%nodes, reading the raw JSON stream
// (decoding only the resourceVersion, as little as the gRPC clients do).
// They start at the collection's current resourceVersion: a watch without
// one first sends every selected pod as ADDED, which the phases would
// count as deliveries, and informerd's watchers start at the present too.
func apiWatchers(ctx context.Context, c *cluster, ns string, n, nodes int) (*watchers, error) {
	list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("read the pods' resourceVersion for the API server watchers: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watchers{got: make([][]receipt, n), cancel: cancel}
	var kube *kubernetes.Clientset
	for i := range n {
		if i%watchesPerConn == 0 {
			cfg := rest.CopyConfig(c.config)
			cfg.Dial = (&net.Dialer{}).DialContext // a transport of its own, not client-go's shared one
			kube = kubernetes.NewForConfigOrDie(cfg)
		}
		body, err := kube.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
			Param("watch", "true").Param("resourceVersion", list.ResourceVersion).
			Param("fieldSelector", "spec.nodeName="+nodeName(i, nodes)).Stream(ctx)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("API server watcher %d: %w", i, err)
		}
		w.wg.Go(func() {
			defer body.Close()
			dec := json.NewDecoder(bufio.NewReaderSize(body, 64<<10))
			for {
				var ev struct {
					Object struct {
						Metadata struct {
							ResourceVersion string `json:"resourceVersion"`
						} `json:"metadata"`
					} `json:"object"`
				}
				if err := dec.Decode(&ev); err != nil {
					if ctx.Err() == nil {
						w.fail(i, err)
					}
					return
				}
				w.record(i, ev.Object.Metadata.ResourceVersion)
			}
		})
	}
	return w, nil
}

// informerWatchers runs n unmodified client-go pod informers against the
// Kubernetes API at cfg (informerd's), informer i on the pods of ns on node
// i%nodes (fieldSelector spec.nodeName, as apiWatchers select), and returns
// once each has synced the pods of its node (pods in all, spread over nodes
// as loadPods spreads them). Each records what its event handler is told
// after that; a watch that fails (client-go's watch error handler, before it
// lists or watches again) counts as a stream that ended early. Over plain
// HTTP, client-go speaks HTTP/1.1: a connection per watch.
func informerWatchers(ctx context.Context, cfg *rest.Config, ns string, n, pods, nodes int) (*watchers, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchers{got: make([][]receipt, n), cancel: cancel}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	infs := make([]cache.SharedIndexInformer, n)
	var synced []cache.InformerSynced
	for i := range n {
		node := nodeName(i, nodes)
		factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + node }))
		infs[i] = factory.Core().V1().Pods().Informer()
		_ = infs[i].SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if ctx.Err() == nil {
				w.fail(i, err)
			}
		})
		record := func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				w.record(i, p.ResourceVersion)
			}
		}
		reg, err := infs[i].AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: record, DeleteFunc: record, UpdateFunc: func(_, o any) { record(o) },
		})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("informer %d: %w", i, err)
		}
		synced = append(synced, reg.HasSynced) // its handler has had the initial pods
		factory.Start(ctx.Done())
		w.wg.Go(func() { <-ctx.Done(); factory.Shutdown() })
	}
	syncCtx, stop := context.WithTimeout(ctx, 5*time.Minute)
	defer stop()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		w.close()
		return nil, fmt.Errorf("%d client-go informers not synced within 5 minutes", n)
	}
	for i, inf := range infs {
		if got, want := len(inf.GetStore().ListKeys()), podsOnNode(i, pods, nodes); got != want {
			w.close()
			return nil, fmt.Errorf("informer %d synced %d pods of %s, want %d", i, got, nodeName(i, nodes), want)
		}
	}
	if err := w.failed(); err != nil {
		w.close()
		return nil, err
	}
	w.take() // the initial pods are not deliveries
	return w, nil
}

// churn updates an annotation of random pods of ns at rate per second (0:
// as fast as 16 writers get acknowledged) for d, and returns each write's
// resourceVersion and acknowledgement time.
func churn(ctx context.Context, c *cluster, ns string, pods, nodes int, rate float64, d time.Duration) (map[string]time.Time, error) {
	return churnEdits(ctx, c, ns, pods, rate, d, annotationEdit, nil)
}

// edit is what a churn changes in a pod: a patch, unique to each write so
// that every write is a change, of the pod or of one of its subresources.
type edit struct {
	name        string
	patch       func(seq int64) (types.PatchType, []byte)
	subresource []string
}

var (
	// annotationEdit sets an annotation: the fan-out's churn, a change of
	// metadata that projections of labels and status leave out.
	annotationEdit = edit{name: "annotation", patch: func(seq int64) (types.PatchType, []byte) {
		return types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"bench/seq":"%d"}}}`, seq)
	}}
	// labelEdit sets a label, which metadata.labels projects.
	labelEdit = edit{name: "label", patch: func(seq int64) (types.PatchType, []byte) {
		return types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"bench/seq":"%d"}}}`, seq)
	}}
	// heartbeatEdit is a kubelet's kind of status write: the Ready
	// condition's lastProbeTime and message (the message makes each write a
	// change within the same second), through the status subresource.
	heartbeatEdit = edit{name: "heartbeat", subresource: []string{"status"}, patch: func(seq int64) (types.PatchType, []byte) {
		return types.StrategicMergePatchType, fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","lastProbeTime":%q,"message":"probe %d"}]}}`,
			time.Now().UTC().Format(time.RFC3339), seq)
	}}
)

// churnSeq numbers the writes of every churn of the run, so that no write
// repeats what an earlier churn wrote to the pod and changes nothing.
var churnSeq atomic.Int64

// churnEdits writes e to random pods of ns at rate per second (0: as fast
// as 16 writers get acknowledged) for d, and returns each write's
// resourceVersion and acknowledgement time. wrote, if not nil, is called
// with the index of each acknowledged write's pod, from the writers'
// goroutines one at a time.
func churnEdits(ctx context.Context, c *cluster, ns string, pods int, rate float64, d time.Duration, e edit, wrote func(pod int)) (map[string]time.Time, error) {
	var mu sync.Mutex
	acks := map[string]time.Time{}
	var firstErr error
	write := func() {
		i := rand.IntN(pods)
		pt, patch := e.patch(churnSeq.Add(1))
		p, err := c.kube.CoreV1().Pods(ns).Patch(ctx, podName(i), pt, patch, metav1.PatchOptions{}, e.subresource...)
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil && ctx.Err() == nil {
				firstErr = fmt.Errorf("%s write: %w", e.name, err)
			}
			return
		}
		acks[p.ResourceVersion] = now
		if wrote != nil {
			wrote(i)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	if rate > 0 {
		sem := make(chan struct{}, 64)
		sent := 0
		for time.Since(start) < d && ctx.Err() == nil {
			due := int(rate * time.Since(start).Seconds())
			for ; sent < due; sent++ {
				sem <- struct{}{}
				wg.Go(func() { write(); <-sem })
			}
			time.Sleep(5 * time.Millisecond)
		}
	} else {
		for range 16 {
			wg.Go(func() {
				for time.Since(start) < d && ctx.Err() == nil {
					write()
				}
			})
		}
	}
	wg.Wait()
	return acks, firstErr
}

// podName is the name benchdata.Pod gives pod i.
func podName(i int) string { return fmt.Sprintf("web-7c9f8d6b5-%05d", i) }

// delays joins receipts with acknowledgements (or, with acks nil, reads the
// floor's generation time from the resourceVersion) and returns p50 and
// p99 in milliseconds. An event may arrive before its write's response
// does; that delay counts as 0.
func delays(got [][]receipt, acks map[string]time.Time) (p50, p99 float64) {
	ds := sortedDelays(got, acks, true)
	return percentile(ds, 50), percentile(ds, 99)
}

// sortedDelays returns every receipt's delay in milliseconds, as delays
// joins them, sorted; with clip, an event that arrived before its write's
// response counts as 0, else as the negative time by which it beat it.
func sortedDelays(got [][]receipt, acks map[string]time.Time, clip bool) []float64 {
	var ds []float64
	for _, rs := range got {
		for _, r := range rs {
			var sent time.Time
			if acks == nil {
				ns, err := strconv.ParseInt(r.rv, 10, 64)
				if err != nil {
					continue
				}
				sent = time.Unix(0, ns)
			} else {
				t, ok := acks[r.rv]
				if !ok {
					continue
				}
				sent = t
			}
			d := float64(r.at.Sub(sent)) / float64(time.Millisecond)
			if clip {
				d = max(0, d)
			}
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return ds
}

// percentile returns the p-th percentile of sorted ds (0 when empty).
func percentile(ds []float64, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// checkReceipts checks that every stream stayed open, so that no
// delivery went uncounted, and that the events are the phase's writes
// (foreign).
func checkReceipts(variant string, w *watchers, got [][]receipt, acks map[string]time.Time) error {
	if err := w.failed(); err != nil {
		return fmt.Errorf("%s: %w; its deliveries would be undercounted", variant, err)
	}
	return foreign(variant, got, acks)
}

// foreign checks that every event the watchers received is one of the
// phase's writes (acks; nil: the floor's, not checked), so that nothing
// but the churn is counted: not a watch's initial events, nor a backlog
// from an earlier phase.
func foreign(variant string, got [][]receipt, acks map[string]time.Time) error {
	if acks == nil {
		return nil
	}
	n, example := 0, ""
	for _, rs := range got {
		for _, r := range rs {
			if _, ok := acks[r.rv]; !ok {
				n, example = n+1, r.rv
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%s: the watchers received %d events that are not this phase's writes (resourceVersion %s, for one); they would be counted as deliveries", variant, n, example)
	}
	return nil
}

func total(got [][]receipt) int {
	n := 0
	for _, rs := range got {
		n += len(rs)
	}
	return n
}
