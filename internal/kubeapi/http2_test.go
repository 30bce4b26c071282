package kubeapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/transport"
)

// TestThousandsOfWatchesOnOneConnection opens 2,000 watches over one
// HTTP/2 connection to informerd's Kubernetes API, served as the daemon
// serves it (a TLS listener of internal/transport, Handler.Server), and
// checks that each is answered over HTTP/2 and receives the next event:
// none refused, and no second connection (an HTTP/2 client opens one when
// the server's MAX_CONCURRENT_STREAMS is reached).
func TestThousandsOfWatchesOnOneConnection(t *testing.T) {
	const watches = 2000
	ns := namespace("kapi-h2")
	f := setup(t, ns)
	ctx := testContext(t)

	dir := t.TempDir()
	ca := testenv.NewCA(t, "informerd-ca")
	cert, key := ca.Issue(t, "127.0.0.1", true)
	certs, err := transport.NewTLS("kube-api", transport.TLSFiles{
		CertFile: testenv.WriteFile(t, dir, "tls.crt", cert),
		KeyFile:  testenv.WriteFile(t, dir, "tls.key", key),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := f.handler.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(lis, certs.Config())) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	var dials atomic.Int32
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		Protocols: new(http.Protocols),
	}
	tr.Protocols.SetHTTP2(true) // HTTP/2 or nothing
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	list, err := f.direct.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRV(t, "configmaps", list.ResourceVersion)
	// One request first: the client then has the connection, and the
	// server's SETTINGS, before the watches start.
	resp, err := client.Get(fmt.Sprintf("https://%s/api/v1/namespaces/%s/configmaps", lis.Addr(), ns))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	url := fmt.Sprintf("https://%s/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s", lis.Addr(), ns, list.ResourceVersion)
	bodies := make([]*json.Decoder, watches)
	var open errgroup.Group
	open.SetLimit(200)
	for i := range watches {
		open.Go(func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("watch %d: %w", i, err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
				return fmt.Errorf("watch %d: %s over %s, want 200 OK over HTTP/2", i, resp.Status, resp.Proto)
			}
			bodies[i] = json.NewDecoder(resp.Body)
			return nil
		})
	}
	if err := open.Wait(); err != nil {
		t.Fatal(err)
	}

	if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "event"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var read errgroup.Group
	read.SetLimit(200)
	for i, dec := range bodies {
		read.Go(func() error {
			var ev struct {
				Type   string
				Object corev1.ConfigMap
			}
			if err := dec.Decode(&ev); err != nil {
				return fmt.Errorf("watch %d: %w", i, err)
			}
			if ev.Type != "ADDED" || ev.Object.Name != "event" {
				return fmt.Errorf("watch %d: %s %s, want ADDED event", i, ev.Type, ev.Object.Name)
			}
			return nil
		})
	}
	if err := read.Wait(); err != nil { // each read ends with the test's context
		t.Fatal(err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for %d watches, want one", n, watches)
	}
}
