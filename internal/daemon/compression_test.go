package daemon_test

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

// TestAPIServerCompression runs informerd behind a proxy to the API server
// that records each watch request's Accept-Encoding: by default informerd
// asks for no gzip; with --api-server-compression it does.
func TestAPIServerCompression(t *testing.T) {
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("api-server-compression=%t", compression), func(t *testing.T) {
			target, err := url.Parse(env.Config.Host)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := rest.TransportFor(env.Config)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var watches []string // Accept-Encoding of each watch request
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.Transport = rt
			proxy.FlushInterval = -1 // pass watch events on at once
			// TLS, as an API server is: client-go ignores DisableCompression
			// for a plain-HTTP server (it uses http.DefaultTransport).
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") == "true" {
					mu.Lock()
					watches = append(watches, r.Header.Get("Accept-Encoding"))
					mu.Unlock()
				}
				proxy.ServeHTTP(w, r)
			}))
			defer srv.Close()

			dir := t.TempDir()
			kubeconfig := testenv.WriteFile(t, dir, "kubeconfig", fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q, certificate-authority-data: %s}}]
contexts: [{name: proxy, context: {cluster: proxy, user: none}}]
users: [{name: none, user: {}}]
current-context: proxy
`, srv.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))))
			o := daemon.NewOptions()
			o.ConfigPath = testenv.WriteFile(t, dir, "config.yaml", []byte("resources:\n  - resource: configmaps\n"))
			o.Kubeconfig = kubeconfig
			o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
			o.APIServerCompression = compression
			_, stop := start(t, o)
			testenv.Eventually(t, time.Minute, "informerd to open its configmaps watch through the proxy", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(watches) > 0
			})
			if err := stop(); err != nil {
				t.Errorf("informerd stopped with %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, enc := range watches {
				if asked := enc == "gzip"; asked != compression {
					t.Errorf("a watch request's Accept-Encoding is %q; want gzip asked for: %t", enc, compression)
				}
			}
		})
	}
}
