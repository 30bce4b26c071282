package kubeapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/pipeline"
)

// noCaches serves no resource: every request is forwarded.
type noCaches struct{}

func (noCaches) Served() []pipeline.Served { return nil }

// TestForwardAnsweredBeforeTheBody: the API server may answer a forwarded
// write before reading its body (a 403 from authorization), and client-go's
// HTTP/2 client, when the answer comes before it has sent the body, never
// sends it. The caller must still get the whole answer: the forwarder once
// waited for the body, and the caller for the end of the answer, both
// forever (TestForwardedWithTheCallersToken's create of a Secret hung so on
// a loaded machine).
func TestForwardAnsweredBeforeTheBody(t *testing.T) {
	const forbidden = `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, forbidden)
	}))
	api.EnableHTTP2 = true
	api.StartTLS()
	defer api.Close()
	h, err := kubeapi.New(kubeapi.Options{
		Caches:   noCaches{},
		Upstream: &rest.Config{Host: api.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(api)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	hc, err := rest.HTTPClientFor(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(srv)}})
	if err != nil {
		t.Fatal(err)
	}

	// A body the client can send only after the answer: it sends none.
	body, _ := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/namespaces/ns/configmaps", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the forwarded answer did not end within 30s: the forwarder waits for the request's body, which the client stopped sending at the 403")
	}
	if err != nil || resp.StatusCode != http.StatusForbidden || string(got) != forbidden {
		t.Errorf("forwarded answer: HTTP %d %q, %v; want the API server's 403", resp.StatusCode, got, err)
	}
}
