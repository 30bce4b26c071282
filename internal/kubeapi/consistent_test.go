package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/testenv"
)

// TestUpstreamRV asks for the resourceVersion where the reader reads (a
// namespace's path for a namespaced read, which a sidecar's RBAC allows),
// and shares one request among readers that arrive while it waits.
func TestUpstreamRV(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var requests atomic.Int64
	release, started := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			close(started)
			<-release // hold the first request while more readers arrive
		}
		mu.Lock()
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"42"},"items":[]}`))
	}))
	defer api.Close()
	defer free() // first: Close waits for the request held until release
	server, err := newAPIServer(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstreamRV(server)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploys := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

	first := make(chan string, 1)
	go func() {
		rv, _ := u.current(context.Background(), cms, "team-a")
		first <- rv
	}()
	testenv.Receive(t, time.Minute, "the first request to reach the API server", started)
	// Readers arriving now wait for one new request, not the one in flight.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if rv, err := u.current(context.Background(), cms, "team-a"); err != nil || rv != "42" {
				t.Errorf("current = %q, %v", rv, err)
			}
		})
	}
	// Every reader has joined the round that waits for the one in flight.
	testenv.Eventually(t, time.Minute, "20 readers waiting", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		rs := u.rounds[scope{cms, "team-a"}]
		return rs != nil && rs.next != nil && rs.next.waiters == 20
	})
	free()
	testenv.Within(t, time.Minute, "the 20 readers to get a resourceVersion", wg.Wait)
	if rv := testenv.Receive(t, time.Minute, "the first reader to get a resourceVersion", first); rv != "42" {
		t.Errorf("first current = %q", rv)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests for 21 readers in two waves, want 2", n)
	}
	if _, err := u.current(context.Background(), deploys, ""); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/api/v1/namespaces/team-a/configmaps?limit=1",
		"/api/v1/namespaces/team-a/configmaps?limit=1",
		"/apis/apps/v1/deployments?limit=1",
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
