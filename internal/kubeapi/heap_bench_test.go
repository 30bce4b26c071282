package kubeapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	goruntime "runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/pipeline"
)

const heapPods = 1000

// BenchmarkInformerHeap is a typed client-go pod informer's live heap per
// cached pod when it reads informerd's Kubernetes API in JSON against in
// protobuf (1,000 realistic pods, managedFields kept), and what its
// initial sync allocated per pod. Each run starts a fresh informer.
func BenchmarkInformerHeap(b *testing.B) {
	ctx := context.Background()
	direct := kubernetes.NewForConfigOrDie(env.Config)
	ns := namespace("kapi-heap")
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(16)
	for i := range heapPods {
		g.Go(func() error {
			p := benchdata.Pod(i, 20, 0)
			p.Namespace, p.ResourceVersion, p.UID, p.ManagedFields = ns, "", "", nil
			_, err := direct.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	c, err := config.Parse(fmt.Appendf(nil, "transform: {stripManagedFields: false}\nresources: [{resource: pods, namespace: %s}]", ns))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := pipeline.NewSet(c, env.Config, log)
	if err != nil {
		b.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- set.Run(rctx) }()
	defer func() { stop(); <-done }()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := set.WaitSynced(sctx); err != nil {
		b.Fatal(err)
	}
	h, err := kubeapi.New(kubeapi.Options{Caches: set, Upstream: env.Config, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer func() { h.Stop(); srv.Close() }()
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(srv)}}

	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		b.Run(ct, func(b *testing.B) {
			cfg := rest.CopyConfig(base)
			cfg.ContentType, cfg.AcceptContentTypes = ct, ct
			client := kubernetes.NewForConfigOrDie(cfg)
			var heap, alloc float64
			for b.Loop() {
				before := benchdata.HeapAfterGC()
				allocBefore := totalAlloc()
				f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
				inf := f.Core().V1().Pods().Informer()
				ictx, istop := context.WithCancel(ctx)
				f.Start(ictx.Done())
				if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) || len(inf.GetStore().List()) != heapPods {
					b.Fatalf("the %s informer did not sync %d pods", ct, heapPods)
				}
				alloc = float64(totalAlloc()-allocBefore) / heapPods
				heap = (float64(benchdata.HeapAfterGC()) - float64(before)) / heapPods
				istop()
				f.Shutdown()
			}
			b.ReportMetric(heap, "heap-B/pod")
			b.ReportMetric(alloc, "sync-alloc-B/pod")
		})
	}
}

func totalAlloc() uint64 {
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.TotalAlloc
}
