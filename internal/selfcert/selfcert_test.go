package selfcert

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/informerd/informerd/internal/transport"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIssue: the serving certificate is valid for every loopback name,
// signed by the CA published for clients; a second start reuses the CA,
// so the clients' copy stays valid.
func TestIssue(t *testing.T) {
	dir := t.TempDir()
	caOut := filepath.Join(t.TempDir(), "shared", "ca.crt")
	i, err := New(Options{Dir: filepath.Join(dir, "private"), CAOut: caOut})
	if err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, caOut)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := readCert(t, i.CertFile())
	for _, host := range DefaultHosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("the serving certificate for %s: %v", host, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "private", "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the CA key: %v, mode %v; want 0600", err, st.Mode())
	}
	again, err := New(Options{Dir: filepath.Join(dir, "private"), CAOut: caOut})
	if err != nil {
		t.Fatal(err)
	}
	if got := readCert(t, caOut); !got.Equal(ca) {
		t.Error("a second start made a new CA: the clients' copy of the old one no longer verifies")
	}
	if readCert(t, again.CertFile()).SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("a second start kept the serving certificate; want a fresh one")
	}
	if _, err := New(Options{}); err == nil {
		t.Error("no private folder: want an error")
	}
}

// TestRunRenews renews the serving certificate after two thirds of its
// lifetime, on an injected clock.
func TestRunRenews(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	i, err := New(Options{Dir: t.TempDir(), Validity: 3 * time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	first := readCert(t, i.CertFile())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- i.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitTimer := func() {
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("Run set no timer")
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitTimer()
	clk.Step(time.Hour)
	time.Sleep(50 * time.Millisecond)
	if readCert(t, i.CertFile()).SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("renewed after a third of the lifetime; want after two thirds")
	}
	clk.Step(time.Hour + time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for readCert(t, i.CertFile()).SerialNumber.Cmp(first.SerialNumber) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not renewed after two thirds of the lifetime")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRotationKeepsConnections serves a stream over the issuer's files
// through the listener's file watcher: after a renewal, new connections get
// the new certificate and the open stream goes on.
func TestRotationKeepsConnections(t *testing.T) {
	caOut := filepath.Join(t.TempDir(), "ca.crt")
	i, err := New(Options{Dir: t.TempDir(), CAOut: caOut})
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles, err := transport.NewTLS("selfcert-test", transport.TLSFiles{CertFile: i.CertFile(), KeyFile: i.KeyFile()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = tlsFiles.Run(ctx) }()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for n := 0; ; n++ {
			if _, err := fmt.Fprintf(w, "%d\n", n); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	// httptest's StartTLS would add a certificate of its own, which a
	// client without SNI (an IP address) is served: TLS on the listener.
	srv.Listener = tls.NewListener(srv.Listener, tlsFiles.Config())
	srv.Start()
	defer srv.Close()
	url := "https://" + srv.Listener.Addr().String()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, caOut))
	serialOf := func() string {
		c, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("a new connection: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	before := serialOf()
	if err := i.issue(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second) // the watcher also re-reads every minute
	for serialOf() == before {
		if time.Now().After(deadline) {
			t.Fatal("new connections still get the old certificate")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 5 {
		if !lines.Scan() {
			t.Fatalf("the stream opened before the renewal ended: %v", lines.Err())
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
