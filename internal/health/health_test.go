package health_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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

// getReport asks /readyz for JSON.
func getReport(t *testing.T, h http.Handler) (int, health.Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?format=json", nil))
	var rep health.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("/readyz?format=json: %v\n%s", err, rec.Body)
	}
	return rec.Code, rep
}

// unstarted is a set of two pipelines that were never run: not ready,
// each Resolving. Nothing is sent to its API server, so fuzzing needs none.
func unstarted(t testing.TB) *pipeline.Set {
	t.Helper()
	c, err := config.Parse([]byte("resources: [{resource: configmaps}, {resource: deployments}]"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.NewSet(c, &rest.Config{Host: "http://127.0.0.1:1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestReadyzFormat: text unless the request asks for JSON by query or
// Accept header; both say the same.
func TestReadyzFormat(t *testing.T) {
	readyz := health.Readyz(unstarted(t))
	const memory = `"memory":{"compression":"off","jsonBytes":0,"storedBytes":0,"storedBytesPerObject":0,"hot":0,"cold":0}`
	const text = "not ready: waiting for the first list of every resource\nconfigmaps: Resolving rv= objects=0\ndeployments: Resolving rv= objects=0\n"
	report := `{"ready":false,"resources":[` +
		`{"name":"configmaps","resource":"configmaps","phase":"Resolving","synced":false,"resourceVersion":"","objects":0,` + memory + `},` +
		`{"name":"deployments","resource":"deployments","phase":"Resolving","synced":false,"resourceVersion":"","objects":0,` + memory + `}]}` + "\n"
	type answer struct {
		Code        int
		ContentType string
		Body        string
	}
	asText := answer{http.StatusServiceUnavailable, "text/plain; charset=utf-8", text}
	asJSON := answer{http.StatusServiceUnavailable, "application/json", report}
	tests := []struct {
		name   string
		query  string
		accept []string
		want   answer
	}{
		{name: "default", want: asText},
		{name: "query", query: "?format=json", want: asJSON},
		{name: "query for text", query: "?format=text", accept: []string{"application/json"}, want: asText},
		{name: "Accept JSON", accept: []string{"application/json"}, want: asJSON},
		{name: "Accept JSON with a quality", accept: []string{"text/html, application/json;q=0.5"}, want: asJSON},
		{name: "Accept in two headers", accept: []string{"text/plain;q=0.2", "application/json;q=0.9"}, want: asJSON},
		{name: "Accept prefers text", accept: []string{"application/json;q=0.5, text/plain"}, want: asText},
		{name: "Accept ties go to text", accept: []string{"application/json, text/plain"}, want: asText},
		{name: "Accept JSON refused", accept: []string{"application/json;q=0"}, want: asText},
		{name: "Accept anything (probes, curl)", accept: []string{"*/*"}, want: asText},
		{name: "Accept malformed", accept: []string{"application/json;q=x, ;;"}, want: asText},
		{name: "unknown format", query: "?format=xml", want: answer{http.StatusBadRequest, "text/plain; charset=utf-8", "unknown format \"xml\": use format=json or format=text\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/readyz"+tt.query, nil)
			for _, a := range tt.accept {
				req.Header.Add("Accept", a)
			}
			rec := httptest.NewRecorder()
			readyz.ServeHTTP(rec, req)
			got := answer{rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadyzRequest: whatever the query and Accept header, /readyz answers
// 503 (the pipelines never run) with text or a Report, or 400 for an
// unknown format.
func FuzzReadyzRequest(f *testing.F) {
	f.Add("json", "application/json")
	f.Add("", "text/plain;q=0.1, application/json;q=0.2")
	f.Add("", "*/*")
	f.Add("yaml", "application/json;q=NaN")
	readyz := health.Readyz(unstarted(f))
	f.Fuzz(func(t *testing.T, format, accept string) {
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.URL.RawQuery = url.Values{"format": {format}}.Encode()
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		readyz.ServeHTTP(rec, req)
		switch ct := rec.Header().Get("Content-Type"); {
		case rec.Code == http.StatusBadRequest:
			if format == "" || format == "json" || format == "text" {
				t.Errorf("format %q refused: %s", format, rec.Body)
			}
		case rec.Code != http.StatusServiceUnavailable:
			t.Errorf("status %d, want 503", rec.Code)
		case ct == "application/json":
			var rep health.Report
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rep.Ready || len(rep.Resources) != 2 {
				t.Errorf("report %s (%v)", rec.Body, err)
			}
		case !strings.HasPrefix(rec.Body.String(), "not ready:"):
			t.Errorf("text %q", rec.Body)
		}
	})
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
	if code, rep := getReport(t, readyz); code != http.StatusServiceUnavailable || rep.Ready || len(rep.Resources) != 1 || rep.Resources[0].Phase != "Resolving" {
		t.Errorf("/readyz?format=json before start = %d %+v, want 503, configmaps Resolving", code, rep)
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
	code, rep := getReport(t, readyz)
	if code != http.StatusOK || !rep.Ready || len(rep.Resources) != 1 {
		t.Fatalf("/readyz?format=json when synced = %d %+v, want 200 and ready", code, rep)
	}
	synced := rep.Resources[0]
	if synced.StalenessSeconds == nil || synced.Upstream == nil || synced.Upstream.Relists < 1 || synced.Upstream.WatchStarts < 1 || synced.ResourceVersion == "" {
		t.Errorf("synced configmaps: %+v, want a staleness, a relist, a watch and a resourceVersion", synced)
	}
	// One configmap, held as it is (the Set compresses nothing).
	json := synced.Memory.JSONBytes
	if json <= 0 {
		t.Errorf("synced configmaps: memory %+v, want the configmap's JSON bytes", synced.Memory)
	}
	want := health.Resource{Name: "configmaps", Resource: "configmaps", Phase: "Synced", Synced: true, Objects: 1,
		Memory: health.Memory{Compression: "off", JSONBytes: json, StoredBytes: json, StoredPerObject: json, Hot: 1}}
	ignore := cmpopts.IgnoreFields(health.Resource{}, "ResourceVersion", "StalenessSeconds", "Upstream")
	if diff := cmp.Diff(want, synced, ignore); diff != "" {
		t.Errorf("synced configmaps (-want +got):\n%s", diff)
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
	poll(t, "the report to name the upstream problem and count the failures", func() bool {
		_, rep := getReport(t, readyz)
		r := rep.Resources[0]
		return rep.Ready && r.UpstreamProblem != "" && r.Upstream.Errors > 0
	})

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

// reports is a fixed set of Reports as Caches.
type reports []pipeline.Report

func (r reports) Reports() []pipeline.Report         { return r }
func (reports) WaitSynced(ctx context.Context) error { return nil }

// TestReadyzShowsIntegrityChecks: a mismatch is named on /readyz, with the
// first differing keys, until a check matches again; checks are counted.
func TestReadyzShowsIntegrityChecks(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	mismatch := pipeline.CheckResult{Result: pipeline.CheckMismatch, At: at, ResourceVersion: "812", Objects: 40, Differences: 2,
		Diff: []string{"ns/a at resourceVersion 700 in the cache, 790 at the API server", "ns/b@801 only in the cache"}}
	rep := func(c pipeline.Consistency) pipeline.Report {
		r := pipeline.Report{Status: pipeline.Status{Name: "pods", Configured: "pods", Phase: pipeline.Synced}, Consistency: c}
		r.Cache.Synced, r.Cache.ResourceVersion, r.Cache.Objects = true, "900", 40
		return r
	}
	counts := map[string]int64{"match": 3, "mismatch": 1, "skipped": 0, "error": 0}
	inconsistent := reports{rep(pipeline.Consistency{Counts: counts, Last: mismatch, Inconsistent: true, LastMismatch: mismatch})}
	code, body := get(t, health.Readyz(inconsistent))
	wantText := `pods: Synced rv=900 objects=40 last-check=mismatch inconsistent="2 objects differed from the API server at resourceVersion 812 (first: ns/a at resourceVersion 700 in the cache, 790 at the API server; ns/b@801 only in the cache); listed again"` + "\n"
	if code != http.StatusOK || body != wantText {
		t.Errorf("/readyz = %d %q, want 200 %q", code, body, wantText)
	}
	_, r := getReport(t, health.Readyz(inconsistent))
	c := r.Resources[0].Consistency
	if c == nil || !c.Inconsistent || c.LastMismatch == nil || c.LastMismatch.Differences != 2 || c.Checks["mismatch"] != 1 || c.Checks["match"] != 3 {
		t.Errorf("report's consistency = %+v", c)
	}

	match := pipeline.CheckResult{Result: pipeline.CheckMatch, At: at.Add(time.Minute), ResourceVersion: "950", Objects: 40}
	counts["match"]++
	repaired := reports{rep(pipeline.Consistency{Counts: counts, Last: match, LastMismatch: mismatch})}
	if _, body := get(t, health.Readyz(repaired)); body != "pods: Synced rv=900 objects=40 last-check=match\n" {
		t.Errorf("/readyz after a match = %q", body)
	}
	if _, body := get(t, health.Readyz(reports{rep(pipeline.Consistency{})})); strings.Contains(body, "check") {
		t.Errorf("/readyz before any check = %q, want no check named", body)
	}
}
