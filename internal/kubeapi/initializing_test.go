package kubeapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/pipeline"
)

// TestReadsWaitWhileResolving: until a cache has looked its resource up in
// discovery, informerd cannot tell whether a read is of that resource.
// Such a read is not forwarded (it would reach the API server without the
// caller's credentials: the 401 that made client-go informers relist after
// a warm restart) but answered as kube-apiserver answers a read of a watch
// cache that is initializing: 429 "storage is (re)initializing" with
// Retry-After, which client-go retries, a watch without listing again.
// Writes are forwarded as always, and reads again once the grace after
// start has passed.
func TestReadsWaitWhileResolving(t *testing.T) {
	var forwarded atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success","code":200}`)
	}))
	defer api.Close()
	c, err := config.Parse([]byte("resources: [{resource: configmaps}]"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.NewSet(c, &rest.Config{Host: api.URL}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h, err := kubeapi.New(kubeapi.Options{Caches: set, Upstream: &rest.Config{Host: api.URL}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, path := range []string{
		"/api/v1/namespaces/a/configmaps",
		"/api/v1/namespaces/a/configmaps/x",
		"/api/v1/namespaces/a/configmaps?watch=true",
		"/api/v1/watch/namespaces/a/configmaps",
		"/apis/apps/v1/deployments", // may be what a cache still resolving serves
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
			st.Reason != metav1.StatusReasonTooManyRequests || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Errorf("GET %s while resolving: HTTP %d, Retry-After %q, %+v (%v); want 429 TooManyRequests, Retry-After 1",
				path, resp.StatusCode, resp.Header.Get("Retry-After"), st, err)
		}
	}
	if n := forwarded.Load(); n != 0 {
		t.Errorf("%d reads forwarded to the API server while resolving, want none", n)
	}

	// A write, and a read of a subresource, are the API server's.
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/namespaces/a/configmaps"},
		{http.MethodGet, "/api/v1/namespaces/a/pods/p/log"},
	} {
		req, err := http.NewRequest(r.method, srv.URL+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer token") // forwarded as the caller's
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s while resolving: HTTP %d, want the API server's 200", r.method, r.path, resp.StatusCode)
		}
	}
	if n := forwarded.Load(); n != 2 {
		t.Errorf("%d requests forwarded, want the write and the subresource read", n)
	}

	// A cache that cannot resolve for long (its API group unavailable)
	// does not hold up the reads of other resources past the grace: they
	// are the API server's again.
	kubeapi.StartedAt(h, time.Now().Add(-time.Hour))
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/a/secrets", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || forwarded.Load() != 3 {
		t.Errorf("a read long after start, a cache still resolving: HTTP %d, %d forwarded; want the API server's 200", resp.StatusCode, forwarded.Load())
	}
}

// resolvingLate is a cache whose resource resolves while a request is
// being routed, as a state restore sets it: the first Resolved is empty,
// every later one the configmaps.
type resolvingLate struct {
	pipeline.Served
	calls atomic.Int64
}

func (r *resolvingLate) Resolved() pipeline.Resolved {
	if r.calls.Add(1) == 1 {
		return pipeline.Resolved{}
	}
	return pipeline.Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
}

type lateCaches struct{ s *resolvingLate }

func (c lateCaches) Served() []pipeline.Served { return []pipeline.Served{c.s} }

// TestReadResolvedWhileRouted: a read that finds no cache and then none
// resolving any more looks again, so a cache that resolved in between (a
// state restore under a herd of informers, 2,368 of 10,000 of them refused
// with 401 in the capacity scenario) answers it, rather than the read being
// forwarded without the caller's credentials. The cache is not synced: the
// read waits, then gets the 429 that client-go retries.
func TestReadResolvedWhileRouted(t *testing.T) {
	c, err := config.Parse([]byte("resources: [{resource: configmaps}]"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.NewSet(c, &rest.Config{Host: "http://127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	late := &resolvingLate{Served: set.Served()[0]}
	h, err := kubeapi.New(kubeapi.Options{Caches: lateCaches{late}, Upstream: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a watch of a resource that resolved while it was routed: HTTP %d %s; want 429 with Retry-After 1 (the cache, not synced)", resp.StatusCode, body)
	}
	if late.calls.Load() < 2 {
		t.Errorf("the cache's resolution was read %d times, want the lookup again", late.calls.Load())
	}
}

// TestWatchWhileStopping: a watch that arrives while informerd shuts down
// gets kube-apiserver's answer during its own shutdown
// (--shutdown-send-retry-after): 429 with Retry-After, which client-go's
// Reflector retries as a watch; a 503 made it list again (one informer in
// 10,000 in the capacity scenario's restart).
func TestWatchWhileStopping(t *testing.T) {
	f := setup(t, "stopping")
	f.handler.Stop()
	_, err := f.cached.CoreV1().ConfigMaps("stopping").Watch(testContext(t), metav1.ListOptions{ResourceVersion: "0"})
	st, ok := err.(apiStatus)
	if !ok || st.Status().Code != http.StatusTooManyRequests || st.Status().Reason != metav1.StatusReasonTooManyRequests ||
		st.Status().Details == nil || st.Status().Details.RetryAfterSeconds != 5 {
		t.Fatalf("a watch while informerd stops: %v, want 429 TooManyRequests with Retry-After 5", err)
	}
}

type apiStatus interface{ Status() metav1.Status }

// deliveries records the delivery delays a handler observes.
type deliveries struct {
	kubeapi.Observer
	mu       sync.Mutex
	resource string
	delays   []time.Duration
}

func (d *deliveries) Request(string, string, int, time.Duration) {}
func (d *deliveries) WatchStarted(string)                        {}
func (d *deliveries) WatchEnded(string)                          {}
func (d *deliveries) Forwarded(int)                              {}
func (d *deliveries) ConsistentRead(string, string)              {}
func (d *deliveries) DeliveryObserver(resource string) func(time.Duration) {
	return func(delay time.Duration) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.resource = resource
		d.delays = append(d.delays, delay)
	}
}

// TestWatchDeliveryDelay: each change a Kubernetes API watch delivers is
// observed once, from its entry in the cache to its flush
// (informerd_watch_delivery_delay_seconds, as for gRPC watches); the
// initial events, which entered the cache before the watch, are not.
func TestWatchDeliveryDelay(t *testing.T) {
	obs := &deliveries{}
	f := setupUpstream(t, "delivery", "resources: [{resource: configmaps, namespace: delivery}]", env.Config, func(o *kubeapi.Options) { o.Observer = obs })
	ctx := testContext(t)
	w, err := f.cached.CoreV1().ConfigMaps("delivery").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 3 {
		if _, err := f.direct.CoreV1().ConfigMaps("delivery").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		<-w.ResultChan()
	}
	// The handler observes a delay once its flush has returned, which may
	// be after the client has read the event.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		obs.mu.Lock()
		n := len(obs.delays)
		obs.mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.delays) != 3 || obs.resource != "configmaps" {
		t.Fatalf("observed %v for %q, want 3 delays for configmaps", obs.delays, obs.resource)
	}
	for _, d := range obs.delays {
		if d <= 0 || d > time.Minute {
			t.Errorf("delivery delay %v, want a positive duration under a minute", d)
		}
	}
}
