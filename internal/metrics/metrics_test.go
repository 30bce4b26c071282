package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// value returns the value of the series name{resource=...} from reg.
func value(t *testing.T, reg *prometheus.Registry, name, resource string) (float64, bool) {
	t.Helper()
	return series(t, reg, name, map[string]string{"resource": resource})
}

// series returns the value of the first series name{labels...} from reg:
// a histogram's is its count of samples.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue metrics
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// TestMetricsFollowTheCache runs a cache against the real API server and
// checks that the documented series move: objects, synced, relists, watch
// starts, resourceVersion, staleness and the ingest delay histogram; and
// that the exposition passes promlint.
func TestMetricsFollowTheCache(t *testing.T) {
	const ns = "metrics"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte("resources: [{resource: configmaps, namespace: metrics}, {resource: sprockets.v1.example.com}]"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	metrics.NewClientGo(reg).Install()
	set, err := pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)), pipeline.WithIngestObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(metrics.NewCollector(set))
	testenv.Run(t, set)

	for i := range 3 {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, "informerd_cache_objects{resource=configmaps} to reach 3", func() bool {
		v, _ := value(t, reg, "informerd_cache_objects", "configmaps")
		return v == 3
	})

	tests := []struct {
		name     string
		resource string
		check    func(v float64) bool
		want     string
	}{
		{"informerd_cache_synced", "configmaps", func(v float64) bool { return v == 1 }, "1"},
		{"informerd_cache_synced", "sprockets.v1.example.com", func(v float64) bool { return v == 0 }, "0 (no such CRD)"},
		{"informerd_cache_bytes", "configmaps", func(v float64) bool { return v > 0 }, "> 0"},
		{"informerd_cache_resource_version", "configmaps", func(v float64) bool { return v > 0 }, "> 0"},
		{"informerd_upstream_relists_total", "configmaps", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"informerd_upstream_watch_starts_total", "configmaps", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"informerd_upstream_staleness_seconds", "configmaps", func(v float64) bool { return v >= 0 && v < 60 }, "in [0, 60)"},
		{"informerd_cache_ingest_delay_seconds", "configmaps", func(v float64) bool { return v >= 3 }, ">= 3 observations"},
	}
	cms, _ := set.Lookup("configmaps")
	if r := cms.(*pipeline.Pipeline).CheckConsistency(ctx); r.Result != pipeline.CheckMatch {
		t.Errorf("integrity check = %+v, want a match", r)
	}
	for result, want := range map[string]float64{"match": 1, "mismatch": 0, "skipped": 0, "error": 0} {
		if v, ok := series(t, reg, "informerd_cache_consistency_checks_total", map[string]string{"resource": "configmaps", "result": result}); !ok || v != want {
			t.Errorf("informerd_cache_consistency_checks_total{resource=configmaps,result=%s} = %v (present %v), want %v", result, v, ok, want)
		}
	}
	if v, ok := value(t, reg, "informerd_cache_inconsistent", "configmaps"); !ok || v != 0 {
		t.Errorf("informerd_cache_inconsistent{resource=configmaps} = %v (present %v), want 0", v, ok)
	}
	if n, err := testutil.GatherAndCount(reg, "informerd_kube_client_requests_total"); err != nil || n == 0 {
		t.Errorf("informerd_kube_client_requests_total has %d series (%v), want client-go's requests counted", n, err)
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.resource, func(t *testing.T) {
			v, ok := value(t, reg, tt.name, tt.resource)
			if !ok || !tt.check(v) {
				t.Errorf("%s{resource=%q} = %v (present %v), want %s", tt.name, tt.resource, v, ok, tt.want)
			}
		})
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// Every series is documented.
	doc := readDoc(t)
	families, _ := reg.Gather()
	for _, f := range families {
		if !strings.Contains(doc, "`"+f.GetName()+"`") {
			t.Errorf("%s is not documented in docs/metrics.md", f.GetName())
		}
	}
}

// TestDeliveryObserver: a stream's observer records into its resource's
// series of the delivery histogram, and a nil Metrics records nothing.
func TestDeliveryObserver(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	pods, nodes := m.DeliveryObserver("pods"), m.DeliveryObserver("nodes")
	pods(5 * time.Millisecond)
	pods(2 * time.Second)
	nodes(time.Millisecond)
	for resource, want := range map[string]float64{"pods": 2, "nodes": 1} {
		if got, ok := value(t, reg, "informerd_watch_delivery_delay_seconds", resource); !ok || got != want {
			t.Errorf("informerd_watch_delivery_delay_seconds{resource=%q} holds %v samples (present: %t), want %v", resource, got, ok, want)
		}
	}
	var none *metrics.Metrics
	none.DeliveryObserver("pods")(time.Second) // must not panic
}

// TestErrorCounters: an index expression that fails on a cached object is
// counted under its resource and index, and the changes not cached are
// counted by reason (none here); both are documented.
func TestErrorCounters(t *testing.T) {
	const ns = "error-counters"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// {.data.list[0]} fails on a string.
	for name, data := range map[string]map[string]string{"fails": {"list": "not a list"}, "fine": nil} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Parse([]byte(`resources: [{resource: configmaps, namespace: error-counters, indexes: [{name: first, jsonpath: "{.data.list[0]}"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	set, err := pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(metrics.NewCollector(set))
	testenv.Run(t, set)
	testenv.Eventually(t, time.Minute, "informerd_cache_objects{resource=configmaps} to reach 2", func() bool {
		v, _ := value(t, reg, "informerd_cache_objects", "configmaps")
		return v == 2
	})

	tests := []struct {
		name   string
		labels map[string]string
		check  func(v float64) bool
		want   string
	}{
		{"informerd_index_errors_total", map[string]string{"resource": "configmaps", "index": "first"}, func(v float64) bool { return v >= 1 }, ">= 1"},
		{"informerd_index_errors_total", map[string]string{"resource": "configmaps", "index": "namespace"}, func(v float64) bool { return v == 0 }, "0"},
		{"informerd_cache_ingest_errors_total", map[string]string{"resource": "configmaps", "reason": "encode"}, func(v float64) bool { return v == 0 }, "0"},
		{"informerd_cache_ingest_errors_total", map[string]string{"resource": "configmaps", "reason": "queue"}, func(v float64) bool { return v == 0 }, "0"},
	}
	doc := readDoc(t)
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.name, tt.labels), func(t *testing.T) {
			v, ok := series(t, reg, tt.name, tt.labels)
			if !ok || !tt.check(v) {
				t.Errorf("%s%v = %v (present %v), want %s", tt.name, tt.labels, v, ok, tt.want)
			}
			if !strings.Contains(doc, "`"+tt.name+"`") {
				t.Errorf("%s is not documented in docs/metrics.md", tt.name)
			}
		})
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
