package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// namespaceWithConfigMap creates namespace ns holding the ConfigMap "cm"
// and returns the client it used.
func namespaceWithConfigMap(t *testing.T, ns string) *kubernetes.Clientset {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return kube
}

// start builds a daemon of o and runs it until the returned stop is called
// or the test ends; stop returns Run's error.
func start(t *testing.T, o daemon.Options) (*daemon.Daemon, func() error) {
	t.Helper()
	d, err := daemon.New(o, discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("informerd did not stop within 30s of its context ending")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("informerd stopped with %v", err)
		}
	})
	return d, stop
}

// TestDaemon runs informerd as main does, in shared mode: gRPC over TLS
// with delegated Kubernetes auth, metrics over HTTPS, against the real API
// server; then stops it as SIGTERM would.
func TestDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kube := namespaceWithConfigMap(t, "daemon")
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
	o := daemon.NewOptions()
	o.ConfigPath = testenv.WriteFile(t, dir, "config.yaml", []byte("resources:\n  - resource: configmaps\n"))
	o.Kubeconfig = kubeconfig
	o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	o.ShutdownTimeout = 5 * time.Second
	o.AuthMode = "kubernetes"
	o.MaxWatches, o.MaxStreamsPerConnection, o.MaxPageSize = 100, 100, 100
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	o.MetricsTLS = o.TLS
	d, _ := start(t, o)
	if !strings.HasPrefix(d.MetricsURL(), "https://") {
		t.Errorf("MetricsURL() = %s, want https://", d.MetricsURL())
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Second}
	testenv.Eventually(t, time.Minute, "/readyz over HTTPS to answer 200", func() bool {
		resp, err := https.Get(d.MetricsURL() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	conn, err := grpc.NewClient(d.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
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
	metrics, err := https.Get(d.MetricsURL() + "/metrics")
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

// TestShutdown runs informerd with a rest.Config and a parsed configuration
// of the test's, on free loopback ports, and stops it as SIGTERM would: a
// client watching gRPC health sees NOT_SERVING, a Watch stream ends with
// UNAVAILABLE and SHUTTING_DOWN, then Run returns and nothing listens.
func TestShutdown(t *testing.T) {
	ctx := context.Background()
	namespaceWithConfigMap(t, "shutdown")
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps, namespace: shutdown}]")
	o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	d, stop := start(t, o)
	if _, ok := d.Caches().Lookup("configmaps"); !ok || d.CacheServer() == nil {
		t.Fatalf("Caches() has no configmaps, or CacheServer() is nil")
	}

	conn, err := grpc.NewClient(d.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	testenv.Eventually(t, time.Minute, "gRPC health to be SERVING", func() bool {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	hw, err := health.Watch(hctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Watch: %v, %v; want SERVING first", resp, err)
	}
	w, err := pb.NewCacheServiceClient(conn).Watch(ctx, &pb.WatchRequest{Resource: "configmaps", SendInitialEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || ev.GetType() != pb.EventType_EVENT_TYPE_ADDED {
		t.Fatalf("first event %v, %v; want cm ADDED", ev, err)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health Watch after stop: %v, %v; want NOT_SERVING", resp, err)
	}
	// An open health Watch holds GracefulStop up to the shutdown timeout;
	// a client that has seen NOT_SERVING goes.
	hcancel()
	for {
		if _, err = w.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.Unavailable || client.ReasonOf(err) != pb.ErrorReason_SHUTTING_DOWN {
		t.Errorf("Watch ended with %v; want UNAVAILABLE, %s", err, pb.ErrorReason_SHUTTING_DOWN)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run: %v", err)
	}
	if resp, err := http.Get(d.MetricsURL() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("/healthz answers after Run returned")
	}
}
