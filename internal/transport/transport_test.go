package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/transport"
)

// serveTLS runs a gRPC health server with f's TLS until the test ends and
// returns its address.
func serveTLS(t *testing.T, f transport.TLSFiles) string {
	t.Helper()
	tc, err := transport.NewTLS("test", f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = tc.Run(ctx); close(done) }()
	lis, err := transport.Listen("--grpc-address", "127.0.0.1:0", transport.Socket{})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc.Config())))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel(); <-done })
	return lis.Addr().String()
}

// check calls the health service over TLS trusting roots, presenting
// clientCert when it is set, and returns the error.
func check(addr string, roots []byte, clientCert, clientKey []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert != nil {
		pair, err := tls.X509KeyPair(clientCert, clientKey)
		if err != nil {
			return err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, otherCA := testenv.NewCA(t, "server-ca"), testenv.NewCA(t, "other-ca")
	cert, key := serverCA.Issue(t, "informerd", true)
	addr := serveTLS(t, transport.TLSFiles{CertFile: testenv.WriteFile(t, dir, "tls.crt", cert), KeyFile: testenv.WriteFile(t, dir, "tls.key", key)})

	if err := check(addr, serverCA.PEM, nil, nil); err != nil {
		t.Errorf("client trusting the server's CA: %v", err)
	}
	if err := check(addr, otherCA.PEM, nil, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client trusting another CA: got %v, want a certificate error", err)
	}

	t.Run("rotated certificate is served without a restart", func(t *testing.T) {
		rotated := testenv.NewCA(t, "rotated-ca")
		cert, key := rotated.Issue(t, "informerd", true)
		testenv.WriteFile(t, dir, "tls.key", key)
		testenv.WriteFile(t, dir, "tls.crt", cert)
		testenv.Eventually(t, 2*time.Minute, "new connections to see the rotated certificate", func() bool {
			return check(addr, rotated.PEM, nil, nil) == nil
		})
		if err := check(addr, serverCA.PEM, nil, nil); err == nil {
			t.Error("the old certificate is still served after rotation")
		}
	})
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testenv.NewCA(t, "server-ca"), testenv.NewCA(t, "client-ca"), testenv.NewCA(t, "other-ca")
	cert, key := serverCA.Issue(t, "informerd", true)
	addr := serveTLS(t, transport.TLSFiles{
		CertFile:     testenv.WriteFile(t, dir, "tls.crt", cert),
		KeyFile:      testenv.WriteFile(t, dir, "tls.key", key),
		ClientCAFile: testenv.WriteFile(t, dir, "client-ca.crt", clientCA.PEM),
	})
	goodCert, goodKey := clientCA.Issue(t, "reader", false, "spiffe://cluster.local/ns/a/sa/reader")
	strangerCert, strangerKey := otherCA.Issue(t, "reader", false)

	tests := []struct {
		name       string
		cert, key  []byte
		wantPassed bool
	}{
		{"certificate from the client CA", goodCert, goodKey, true},
		{"no certificate", nil, nil, false},
		{"certificate from another CA", strangerCert, strangerKey, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := check(addr, serverCA.PEM, tc.cert, tc.key)
			if (err == nil) != tc.wantPassed {
				t.Errorf("got %v, want passed=%v", err, tc.wantPassed)
			}
		})
	}
}

func TestNewTLSErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "ca")
	cert, key := ca.Issue(t, "informerd", true)
	_, otherKey := ca.Issue(t, "other", true)
	certFile := testenv.WriteFile(t, dir, "tls.crt", cert)
	tests := []struct {
		name, want string
		files      transport.TLSFiles
	}{
		{"key missing", "needs both", transport.TLSFiles{CertFile: certFile}},
		{"no such file", "missing.crt", transport.TLSFiles{CertFile: filepath.Join(dir, "missing.crt"), KeyFile: certFile}},
		{"key of another certificate", "tls.crt", transport.TLSFiles{CertFile: certFile, KeyFile: testenv.WriteFile(t, dir, "other.key", otherKey)}},
		{"client CA missing", "ca.crt", transport.TLSFiles{CertFile: certFile, KeyFile: testenv.WriteFile(t, dir, "tls.key", key), ClientCAFile: filepath.Join(dir, "ca.crt")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transport.NewTLS("grpc", tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestSecurityCheck(t *testing.T) {
	tests := []struct {
		name        string
		s           transport.Security
		wantErr     string
		wantWarning bool
	}{
		{name: "none on loopback", s: transport.Security{Address: "127.0.0.1:50051", AuthMode: "none"}},
		{name: "none on localhost", s: transport.Security{Address: "localhost:50051", AuthMode: "none"}},
		{name: "none on ::1", s: transport.Security{Address: "[::1]:50051", AuthMode: "none"}},
		{name: "none on a Unix socket", s: transport.Security{Address: "unix:///run/informerd.sock", AuthMode: "none"}},
		{name: "none on all interfaces", s: transport.Security{Address: ":50051", AuthMode: "none", TLS: true}, wantErr: "only on a Unix socket or a loopback"},
		{name: "none on all interfaces, plaintext allowed", s: transport.Security{Address: "0.0.0.0:50051", AuthMode: "none", AllowPlaintext: true}, wantErr: "only on a Unix socket or a loopback"},
		{name: "kubernetes with TLS", s: transport.Security{Address: ":50051", AuthMode: "kubernetes", TLS: true}},
		{name: "kubernetes plaintext on the network", s: transport.Security{Address: "10.0.0.1:50051", AuthMode: "kubernetes"}, wantErr: "--insecure-allow-plaintext"},
		{name: "kubernetes plaintext allowed", s: transport.Security{Address: ":50051", AuthMode: "kubernetes", AllowPlaintext: true}, wantWarning: true},
		{name: "kubernetes plaintext on loopback", s: transport.Security{Address: "127.0.0.1:50051", AuthMode: "kubernetes"}},
		{name: "mtls without a client CA", s: transport.Security{Address: ":50051", AuthMode: "mtls", TLS: true}, wantErr: "--tls-client-ca-file"},
		{name: "mtls", s: transport.Security{Address: ":50051", AuthMode: "mtls", TLS: true, ClientCA: true}},
		{name: "unknown mode", s: transport.Security{Address: "127.0.0.1:1", AuthMode: "open"}, wantErr: "want none, kubernetes or mtls"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			warning, err := tc.s.Check()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
			if (warning != "") != tc.wantWarning {
				t.Errorf("warning %q, want one: %v", warning, tc.wantWarning)
			}
		})
	}
}

func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "informerd.sock")
	// A socket left by a previous run is replaced.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	l, err := transport.Listen("--grpc-address", "unix://"+path, transport.Socket{Mode: 0o600, Owner: ":" + itoa(os.Getgid())})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want socket with 0600", fi.Mode())
	}
	// Anything that is not a socket is left alone.
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := transport.Listen("--grpc-address", "unix://"+file, transport.Socket{}); err == nil {
		t.Error("listening over a regular file succeeded")
	}
	if data, _ := os.ReadFile(file); string(data) != "keep" {
		t.Error("a regular file at the socket path was replaced")
	}
	for _, owner := range []string{"root", "1:x", ":", "-1"} {
		if _, err := transport.Listen("--grpc-address", "unix://"+filepath.Join(t.TempDir(), "s"), transport.Socket{Owner: owner}); err == nil || !strings.Contains(err.Error(), "--unix-socket-owner") {
			t.Errorf("owner %q: got %v, want an error naming --unix-socket-owner", owner, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
