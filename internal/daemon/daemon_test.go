package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestDaemon runs informerd as main wires it, in shared mode: gRPC over TLS
// with delegated Kubernetes auth, metrics over HTTPS, against the real API
// server; then stops it as SIGTERM would.
func TestDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "daemon"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("daemon").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts("daemon").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles("daemon").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("daemon").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app", Namespace: "daemon"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("daemon").CreateToken(ctx, "app", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"informerd"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ca := testenv.NewCA(t, "informerd-ca")
	cert, key := ca.Issue(t, "informerd", true)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{
		configPath:      testenv.WriteFile(t, dir, "config.yaml", []byte("resources:\n  - resource: configmaps\n")),
		kubeconfig:      kubeconfig,
		grpcAddress:     freeAddr(t),
		metricsAddress:  freeAddr(t),
		shutdownTimeout: 5 * time.Second,
		authMode:        "kubernetes",
		audiences:       "informerd",
		maxWatches:      100,
		maxStreamsConn:  100,
		maxRecvMsgBytes: 1 << 20,
		maxPageSize:     100,
	}
	o.tls.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.tls.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	o.metricsTLS = o.tls
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run1(runCtx, o, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("informerd stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("informerd did not stop within 30s of its context ending")
		}
	}()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Second}
	testenv.Eventually(t, time.Minute, "/readyz over HTTPS to answer 200", func() bool {
		resp, err := https.Get("https://" + o.metricsAddress + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	conn, err := grpc.NewClient(o.grpcAddress, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewCacheServiceClient(conn)
	testenv.Eventually(t, time.Minute, "gRPC health, without a token, to be SERVING", func() bool {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tr.Status.Token)
	resp, err := client.List(authed, &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: "daemon"}})
	if err != nil || len(resp.GetObjects()) != 1 || resp.GetObjects()[0].GetName() != "cm" {
		t.Errorf("List with the app's token: %v %v, want [cm]", resp.GetObjects(), err)
	}
	if _, err := client.List(ctx, &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: "daemon"}}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("List without a token: %v, want UNAUTHENTICATED", err)
	}
	if _, err := client.List(authed, &pb.ListRequest{Resource: "configmaps"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("List of all namespaces: %v, want PERMISSION_DENIED", err)
	}
	metrics, err := https.Get("https://" + o.metricsAddress + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	for _, want := range []string{`informerd_auth_review_requests_total{code="201",review="token"}`, `informerd_auth_review_requests_total{code="201",review="access"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
