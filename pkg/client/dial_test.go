package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// echo answers ListResources with one resource named after what it saw of
// the caller: its bearer token and its client certificate's name.
type echo struct {
	pb.UnimplementedCacheServiceServer
}

func (echo) ListResources(ctx context.Context, _ *pb.ListResourcesRequest) (*pb.ListResourcesResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	name := strings.Join(md.Get("authorization"), ",")
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			name += " cert=" + ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	return &pb.ListResourcesResponse{Resources: []*pb.ResourceInfo{{Name: name}}}, nil
}

func serveEcho(t *testing.T, network, addr string, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterCacheServiceServer(gs, echo{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func seenBy(t *testing.T, c client.Config) string {
	t.Helper()
	conn, err := client.Dial(c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewCacheServiceClient(conn).ListResources(context.Background(), &pb.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetResources()[0].GetName()
}

// TestDialUnixTokenRotation dials a Unix socket with a bearer token file
// and replaces the file as the kubelet does: the next call carries the new
// token.
func TestDialUnixTokenRotation(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "informerd.sock")
	serveEcho(t, "unix", sock)
	tokenFile := testenv.WriteFile(t, dir, "token", []byte("first\n"))
	conn, err := client.Dial(client.Config{Address: "unix://" + sock, TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewCacheServiceClient(conn)
	call := func() string {
		resp, err := c.ListResources(context.Background(), &pb.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetResources()[0].GetName()
	}
	if got := call(); got != "Bearer first" {
		t.Errorf("token sent: %q, want %q", got, "Bearer first")
	}
	testenv.WriteFile(t, dir, "token", []byte("second\n"))
	if got := call(); got != "Bearer second" {
		t.Errorf("token sent after rotation: %q, want %q", got, "Bearer second")
	}
}

// TestDialTLS dials informerd over TLS, then mutual TLS, checking the
// server certificate against the CA file.
func TestDialTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "informerd-ca")
	certPEM, keyPEM := ca.Issue(t, "informerd", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool})
	addr := serveEcho(t, "tcp", "127.0.0.1:0", grpc.Creds(creds))
	caFile := testenv.WriteFile(t, dir, "ca.crt", ca.PEM)
	clientCert, clientKey := ca.Issue(t, "app", false)

	token := testenv.WriteFile(t, dir, "token", []byte("tok"))
	if got := seenBy(t, client.Config{Address: addr, CAFile: caFile, TokenFile: token}); got != "Bearer tok" {
		t.Errorf("over TLS the server saw %q", got)
	}
	got := seenBy(t, client.Config{Address: addr, CAFile: caFile,
		CertFile: testenv.WriteFile(t, dir, "app.crt", clientCert), KeyFile: testenv.WriteFile(t, dir, "app.key", clientKey)})
	if got != " cert=app" {
		t.Errorf("over mutual TLS the server saw %q, want the client certificate", got)
	}

	// A CA that did not sign the server's certificate fails the call.
	other := testenv.WriteFile(t, dir, "other.crt", testenv.NewCA(t, "other").PEM)
	conn, err := client.Dial(client.Config{Address: addr, CAFile: other})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewCacheServiceClient(conn).ListResources(context.Background(), &pb.ListResourcesRequest{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with the wrong CA: %v, want a certificate error", err)
	}
}

func TestDialRefusesPlaintextOffLoopback(t *testing.T) {
	tests := []struct {
		name    string
		c       client.Config
		wantErr string
	}{
		{name: "remote plaintext", c: client.Config{Address: "informerd.example:50051"}, wantErr: "needs TLS"},
		{name: "no address", c: client.Config{}, wantErr: "no address"},
		{name: "certificate without key", c: client.Config{Address: "127.0.0.1:1", CertFile: "x"}, wantErr: "both"},
		{name: "remote plaintext allowed", c: client.Config{Address: "informerd.example:50051", Insecure: true}},
		{name: "loopback plaintext", c: client.Config{Address: "localhost:50051"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := client.Dial(tt.c)
			if conn != nil {
				conn.Close()
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Dial: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
