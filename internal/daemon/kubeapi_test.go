package daemon_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/transport"
)

// TestKubeAPIWithDelegatedAuth serves the Kubernetes API over TLS with
// --auth-mode kubernetes: a token issued for informerd and the API server
// reads what its RBAC allows from the cache, is refused the rest with the
// API server's 403, and writes through informerd with its own rights.
func TestKubeAPIWithDelegatedAuth(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const ns = "kube-api-auth"
	kube := namespaceWithConfigMap(t, ns)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "rw"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rw"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app", Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "rw"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One token for both: informerd reviews it for its audience, the API
	// server accepts it for its own when a write is forwarded.
	_, issuer := env.ServiceAccountSigner()
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "app", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"informerd", issuer}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ca := testenv.NewCA(t, "informerd-ca")
	cert, key := ca.Issue(t, "127.0.0.1", true)
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps}]")
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.AuthMode = "kubernetes"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	d, _ := start(t, o)

	cfg := &rest.Config{Host: d.KubeAPIURL(), BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM}}
	app := kubernetes.NewForConfigOrDie(cfg)
	testenv.Eventually(t, time.Minute, "a list through informerd's Kubernetes API", func() bool {
		l, err := app.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].Name == "cm"
	})
	if _, err := app.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get, which the app may not: %v, want 403 Forbidden", err)
	}
	if _, err := app.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list across namespaces: %v, want 403 Forbidden", err)
	}
	if _, err := app.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create forwarded with the app's token: %v", err)
	}
	anon := kubernetes.NewForConfigOrDie(&rest.Config{Host: d.KubeAPIURL(), TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM}})
	if _, err := anon.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("list without a token: %v, want 401 Unauthorized", err)
	}
}

// TestKubeAPIOnUnixSocket serves the Kubernetes API in plaintext on a Unix
// socket, over HTTP/1.1 and over HTTP/2 without TLS, and refuses plaintext
// on a non-loopback address.
func TestKubeAPIOnUnixSocket(t *testing.T) {
	ctx := context.Background()
	const ns = "kube-api-unix"
	namespaceWithConfigMap(t, ns)
	sock := filepath.Join(t.TempDir(), "kube.sock")
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps, namespace: "+ns+"}]")
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "unix://"+sock
	d, _ := start(t, o)
	if d.KubeAPIURL() != sock {
		t.Errorf("KubeAPIURL() = %q, want the socket %s", d.KubeAPIURL(), sock)
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", sock)
	}
	for _, h2 := range []bool{false, true} {
		cfg := &rest.Config{Host: "http://localhost", Dial: dial}
		if h2 {
			// HTTP/2 with prior knowledge, as a client on a socket would.
			cfg.Transport = h2cTransport(dial)
			cfg.Dial = nil
		}
		c := kubernetes.NewForConfigOrDie(cfg)
		testenv.Eventually(t, time.Minute, "a list over the socket", func() bool {
			l, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 1
		})
	}
	info, err := os.Stat(sock)
	if err != nil || info.Mode()&os.ModeSocket == 0 {
		t.Errorf("%s is not a socket: %v", sock, err)
	}

	bad := daemon.NewOptions()
	bad.RestConfig = env.Config
	bad.Config = o.Config
	bad.GRPCAddress, bad.KubeAPIAddress = "127.0.0.1:0", "0.0.0.0:0"
	if err := bad.Validate(); !errors.Is(err, transport.ErrInsecure) {
		t.Errorf("plaintext Kubernetes API on all interfaces: Validate() = %v, want ErrInsecure", err)
	}
}

// h2cTransport speaks only HTTP/2 without TLS, over dial.
func h2cTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) http.RoundTripper {
	tr := &http.Transport{DialContext: dial}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// TestInformerAcrossRestart runs an unmodified client-go informer against
// informerd's Kubernetes API while informerd restarts on the same address
// and the configmaps change meanwhile: it ends with the API server's state.
func TestInformerAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "kube-api-restart"
	kube := namespaceWithConfigMap(t, ns)
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps, namespace: "+ns+"}]")
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", addr
	_, stop := start(t, o)

	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr}), 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	testenv.Eventually(t, time.Minute, "the informer to sync through informerd", inf.HasSynced)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "while-down"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{ns + "/after", ns + "/while-down"}
	testenv.Eventually(t, time.Minute, "the informer to hold the API server's configmaps after the restart", func() bool {
		keys := inf.GetStore().ListKeys()
		slices.Sort(keys)
		return slices.Equal(keys, want)
	})
}

// TestKubeAPIWithClientCertificates serves the Kubernetes API with
// --auth-mode mtls: a certificate the config maps to configmaps in one
// namespace reads them from the cache and nothing else.
func TestKubeAPIWithClientCertificates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const ns = "kube-api-mtls"
	namespaceWithConfigMap(t, ns)
	ca := testenv.NewCA(t, "informerd-ca")
	serverCert, serverKey := ca.Issue(t, "127.0.0.1", true)
	clientCert, clientKey := ca.Issue(t, "app", false)
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps}]\nmtlsClients:\n  - {commonName: app, resources: [configmaps], namespaces: ["+ns+"]}\n")
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.AuthMode = "mtls"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", serverCert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", serverKey)
	o.TLS.ClientCAFile = testenv.WriteFile(t, dir, "ca.crt", ca.PEM)
	d, _ := start(t, o)

	app := kubernetes.NewForConfigOrDie(&rest.Config{Host: d.KubeAPIURL(), TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM, CertData: clientCert, KeyData: clientKey}})
	testenv.Eventually(t, time.Minute, "a list with the app's certificate", func() bool {
		l, err := app.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1
	})
	if _, err := app.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list in a namespace the certificate is not mapped to: %v, want 403", err)
	}
	// Not served from the cache and not forwardable: a certificate is not a
	// token informerd could pass on.
	_, err := app.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("list of an uncached resource with a certificate only: %v, want 403 saying why", err)
	}
}

// TestKubeAPIShutdownRefusesNoWatch: when informerd stops, the watches
// over its Kubernetes API end only once its listener is closed and its
// HTTP/2 connections told GOAWAY, so that a client watching again at once
// (as client-go does) is not answered 429 by the stopping process but
// fails to connect, and retries until the next one listens. 20 watches
// share one HTTP/2 connection and each watches again the moment its
// stream ends.
func TestKubeAPIShutdownRefusesNoWatch(t *testing.T) {
	const ns = "kube-api-stop"
	namespaceWithConfigMap(t, ns)
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps, namespace: "+ns+"}]")
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	d, stop := start(t, o)
	addr := strings.TrimPrefix(d.KubeAPIURL(), "http://")
	client := &http.Client{Transport: h2cTransport((&net.Dialer{}).DialContext)}
	url := "http://" + addr + "/api/v1/namespaces/" + ns + "/configmaps?watch=true&resourceVersion=0"
	testenv.Eventually(t, time.Minute, "the cache to serve", func() bool {
		resp, err := client.Get("http://" + addr + "/api/v1/namespaces/" + ns + "/configmaps")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	const watches = 20
	opened := make(chan error, watches)
	again := make(chan string, watches)
	for range watches {
		go func() {
			resp, err := client.Get(url)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
			opened <- err
			if err != nil {
				return
			}
			// The initial ADDED, then nothing until informerd stops.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			resp, err = client.Get(url)
			if err != nil {
				again <- "" // not answered: the wanted outcome
				return
			}
			resp.Body.Close()
			again <- resp.Status
		}()
	}
	for range watches {
		if err := <-opened; err != nil {
			t.Fatalf("a watch: %v", err)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for range watches {
		if status := <-again; status != "" {
			t.Errorf("a watch sent while informerd stopped was answered %s, want no answer (a refused connection)", status)
		}
	}
}
