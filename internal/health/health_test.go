package health_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func get(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, cond)
}

// TestUpstreamOutage: before sync /readyz is 503 naming the resource; once
// synced it is 200. When the API server becomes unreachable informerd stays
// ready and keeps answering Get and List from its cache, while /readyz's
// body names the problem and the staleness metric grows.
func TestUpstreamOutage(t *testing.T) {
	const ns = "outage"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy, err := testenv.NewProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	c, err := config.Parse([]byte("resources: [{resource: configmaps, namespace: outage}]"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.NewSet(c, proxy.Config(env.Config), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	readyz := health.Readyz(set)
	if code, body := get(t, readyz); code != http.StatusServiceUnavailable || !strings.Contains(body, "configmaps: Resolving") {
		t.Errorf("/readyz before start = %d %q, want 503 naming configmaps", code, body)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(set))
	srv := server.New(set, server.Options{})
	defer srv.Stop()

	testenv.Run(t, set)
	syncCtx, cancelSync := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSync()
	if err := set.WaitSynced(syncCtx); err != nil {
		t.Fatalf("wait for sync: %v", err)
	}
	if code, body := get(t, readyz); code != http.StatusOK || strings.Contains(body, "upstream-problem") {
		t.Errorf("/readyz when synced = %d %q, want 200 without problems", code, body)
	}

	proxy.Cut()
	poll(t, "/readyz to name the upstream problem", func() bool {
		_, body := get(t, readyz)
		return strings.Contains(body, "upstream-problem=")
	})
	code, body := get(t, readyz)
	if code != http.StatusOK {
		t.Errorf("/readyz during the outage = %d, want 200 (the cache is still served)", code)
	}
	t.Logf("/readyz during the outage: %s", strings.TrimSpace(body))

	staleness := func() float64 {
		v, err := testutil.GatherAndCount(reg, "informerd_upstream_staleness_seconds")
		if err != nil || v != 1 {
			t.Fatalf("staleness series: %d, %v", v, err)
		}
		families, _ := reg.Gather()
		for _, f := range families {
			if f.GetName() == "informerd_upstream_staleness_seconds" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	first := staleness()
	poll(t, "staleness to grow", func() bool { return staleness() > first+1 })

	got, err := srv.Get(ctx, &pb.GetRequest{Resource: "configmaps", Namespace: ns, Name: "kept"})
	if err != nil || got.GetObject().GetName() != "kept" {
		t.Errorf("Get during the outage = %v, %v; want the cached object", got, err)
	}
	list, err := srv.List(ctx, &pb.ListRequest{Resource: "configmaps"})
	if err != nil || len(list.GetObjects()) != 1 {
		t.Errorf("List during the outage = %v, %v; want the cached object", list, err)
	}

	proxy.Restore()
	// The first change after recovery shows events flow again.
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the problem to clear after recovery", func() bool {
		_, body := get(t, readyz)
		return !strings.Contains(body, "upstream-problem=")
	})
}
