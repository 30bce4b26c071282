package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

// authzFixture is informerd with --auth-mode kubernetes and an audit log
// (the API server's policy: namespace testenv.AuditNamespace at level
// Metadata), caching the secrets and configmaps of that namespace and
// pods by node, next to the real API server. Its callers are
// ServiceAccounts of the namespace, each with one token that both accept.
type authzFixture struct {
	ns         string
	kube       *kubernetes.Clientset
	d          *daemon.Daemon
	ca         []byte // informerd's serving CA
	auditLog   string // informerd's
	tokens     map[string]string
	dir        string
	directHTTP *http.Client
	cachedHTTP *http.Client
}

const authzConfig = `
resources:
  - resource: secrets
    namespace: %[1]s
  - resource: configmaps
    namespace: %[1]s
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
`

// The callers and what RBAC lets them do in the namespace:
//   - reader reads secrets and configmaps, and may impersonate tenant;
//   - imp reads nothing, and may impersonate the users boss and tenant;
//   - plain may do nothing;
//   - kubelet may impersonate system:node:n1 in group system:nodes.
//
// The users: tenant reads configmaps; boss reads secrets and configmaps
// and creates configmaps.
var authzCallers = []string{"reader", "imp", "plain", "kubelet"}

// authzTokens are the callers' tokens once authzWorld has made them: the
// namespace, its objects and RBAC are made once per test binary, for the
// test and the benchmarks alike.
var authzTokens map[string]string

func authzWorld(t testing.TB) map[string]string {
	t.Helper()
	if authzTokens != nil {
		return authzTokens
	}
	ctx := context.Background()
	ns := testenv.AuditNamespace
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		create func() error
	}{
		{func() error {
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "on-n1"},
				Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			}, metav1.CreateOptions{})
			return err
		}},
	} {
		if err := o.create(); err != nil {
			t.Fatal(err)
		}
	}
	sa := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}
	}
	usr := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: name}
	}
	read := func(resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: []string{"get", "list", "watch"}}
	}
	impersonate := func(resource string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, ResourceNames: names, Verbs: []string{"impersonate"}}
	}
	grantRole(t, kube, ns, "reader", []rbacv1.Subject{sa("reader")}, read("secrets", "configmaps"))
	grantRole(t, kube, ns, "tenant", []rbacv1.Subject{usr("tenant")}, read("configmaps"))
	grantRole(t, kube, ns, "boss", []rbacv1.Subject{usr("boss")}, read("secrets", "configmaps"),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	grantClusterRole(t, kube, ns+"-reader-as-tenant", []rbacv1.Subject{sa("reader")}, impersonate("users", "tenant"))
	grantClusterRole(t, kube, ns+"-imp", []rbacv1.Subject{sa("imp")}, impersonate("users", "boss", "tenant"))
	grantClusterRole(t, kube, ns+"-kubelet", []rbacv1.Subject{sa("kubelet")},
		impersonate("users", "system:node:n1"), impersonate("groups", "system:nodes", "system:authenticated"))

	_, issuer := env.ServiceAccountSigner()
	tokens := map[string]string{}
	for _, name := range authzCallers {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"informerd", issuer}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tr.Status.Token
	}
	authzTokens = tokens
	return tokens
}

// startAuthz runs informerd (authzConfig, --auth-mode kubernetes, the
// audit log) until the test ends; tweak, if not nil, changes its options.
func startAuthz(t testing.TB, tweak func(*daemon.Options)) *authzFixture {
	t.Helper()
	ctx := context.Background()
	ns := testenv.AuditNamespace
	tokens := authzWorld(t)
	c, err := config.Parse(fmt.Appendf(nil, authzConfig, ns))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := testenv.NewCA(t, "authz-ca")
	cert, key := ca.Issue(t, "127.0.0.1", true)
	o := daemon.NewOptions()
	o.RestConfig, o.Config = env.Config, c
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.AuthMode = "kubernetes"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	o.Audit.PolicyFile = testenv.WriteFile(t, dir, "audit-policy.yaml", []byte(testenv.AuditPolicy))
	o.Audit.LogPath = filepath.Join(dir, "audit.log")
	if tweak != nil {
		tweak(&o)
	}
	d, err := daemon.New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, d)
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := d.Caches().WaitSynced(sctx); err != nil {
		t.Fatalf("informerd's caches did not sync: %v", err)
	}
	return &authzFixture{
		ns: ns, kube: kubernetes.NewForConfigOrDie(env.Config), d: d, ca: ca.PEM, auditLog: o.Audit.LogPath, tokens: tokens, dir: dir,
		directHTTP: httpClient(t, &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}),
		cachedHTTP: httpClient(t, &rest.Config{Host: d.KubeAPIURL(), TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM}}),
	}
}

func httpClient(t testing.TB, cfg *rest.Config) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func grantRole(t testing.TB, kube *kubernetes.Clientset, ns, name string, subjects []rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func grantClusterRole(t testing.TB, kube *kubernetes.Clientset, name string, subjects []rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reply is what a client reads from an answer: the status, the Status of
// a refusal, and the names of the objects of a success.
type reply struct {
	Code    int
	Reason  metav1.StatusReason
	Message string
	Names   []string
}

// ask sends GET path with the caller's token and headers. A watch is
// answered when its headers arrive: only its status is compared.
func ask(t testing.TB, c *http.Client, base, token string, h http.Header, path string, watch bool) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header = h.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(r)
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	defer resp.Body.Close()
	out := reply{Code: resp.StatusCode}
	if watch && resp.StatusCode == http.StatusOK {
		return out
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s%s: read: %v", base, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var s metav1.Status
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("GET %s%s: %d with a body that is not a Status: %q", base, path, resp.StatusCode, body)
		}
		out.Reason, out.Message = s.Reason, s.Message
		return out
	}
	var obj struct {
		Metadata struct{ Name string }
		Items    []struct{ Metadata struct{ Name string } }
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	if obj.Metadata.Name != "" {
		out.Names = []string{obj.Metadata.Name}
	}
	for _, it := range obj.Items {
		out.Names = append(out.Names, it.Metadata.Name)
	}
	slices.Sort(out.Names)
	return out
}

// TestKubeAPIAuthorization: informerd with --auth-mode kubernetes grants
// through its Kubernetes API exactly what the API server grants, and
// audits what it answers itself as the API server would.
func TestKubeAPIAuthorization(t *testing.T) {
	f := startAuthz(t, nil)
	t.Run("impersonation", func(t *testing.T) { impersonationAgainstAPIServer(t, f) })
	t.Run("kubectl --as", func(t *testing.T) { kubectlAs(t, f) })
	t.Run("audit", func(t *testing.T) { auditOfCachedReads(t, f) })
	t.Run("version as an impersonated user", func(t *testing.T) { versionHeaders(t, f) })
}

// versionHeaders: GET /version, impersonating, is the API server's own
// answer through informerd, with the API priority and fairness headers
// that tell the client which flow schema and priority level served it
// (Kubernetes' own APF e2e spec reads them).
func versionHeaders(t *testing.T, f *authzFixture) {
	pf := func(c *http.Client, base string) http.Header {
		r, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(base, "/")+"/version", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+f.tokens["imp"])
		r.Header.Set("Impersonate-User", "boss")
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/version as boss: %d", base, resp.StatusCode)
		}
		out := http.Header{}
		for _, k := range []string{"X-Kubernetes-Pf-Flowschema-Uid", "X-Kubernetes-Pf-Prioritylevel-Uid"} {
			if resp.Header.Get(k) == "" {
				t.Errorf("GET %s/version as boss: no %s header", base, k)
			}
			out.Set(k, resp.Header.Get(k))
		}
		return out
	}
	direct, cached := pf(f.directHTTP, env.Config.Host), pf(f.cachedHTTP, f.d.KubeAPIURL())
	if diff := cmp.Diff(direct, cached); diff != "" {
		t.Errorf("APF headers of /version differ (-direct +informerd):\n%s", diff)
	}
}

// impersonationAgainstAPIServer sends the same reads, as the same
// callers with the same impersonation headers, to the API server and to
// informerd (which answers them from its cache) and wants the same answer:
// status, Status reason and message, and the objects. The table covers
// both directions of impersonation (a privilege drop holds; an allowed
// impersonation reads as the impersonated user), each impersonation
// header, and the Node authorizer, which reads field selectors.
func impersonationAgainstAPIServer(t *testing.T, f *authzFixture) {
	as := func(user string, kv ...string) http.Header {
		h := http.Header{}
		if user != "" {
			h.Set("Impersonate-User", user)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	callers := []struct {
		name, sa string
		h        http.Header
	}{
		{"reader", "reader", nil},
		{"reader as tenant (a privilege drop)", "reader", as("tenant")},
		{"imp itself", "imp", nil},
		{"imp as boss", "imp", as("boss")},
		{"imp as tenant", "imp", as("tenant")},
		{"imp as a user it may not", "imp", as("nobody")},
		{"imp as boss in system:masters", "imp", as("boss", "Impersonate-Group", "system:masters")},
		{"imp as boss with a uid", "imp", as("boss", "Impersonate-Uid", "1234")},
		{"imp as boss with an extra", "imp", as("boss", "Impersonate-Extra-Scopes", "view")},
		{"imp as a group only", "imp", as("", "Impersonate-Group", "system:masters")},
		{"plain as boss", "plain", as("boss")},
		{"plain", "plain", nil},
	}
	base := "/api/v1/namespaces/" + f.ns
	reads := []read{
		{"get", "secrets", base + "/secrets/s1"},
		{"list", "secrets", base + "/secrets"},
		{"watch", "secrets", base + "/secrets?watch=1"},
		{"get", "configmaps", base + "/configmaps/cm"},
		{"list", "configmaps", base + "/configmaps"},
		{"watch", "configmaps", base + "/configmaps?watch=1"},
	}
	for _, c := range callers {
		for _, r := range reads {
			t.Run(c.name+"/"+r.verb+" "+r.resource, func(t *testing.T) {
				f.same(t, c.sa, c.h, r)
			})
		}
	}

	// The Node authorizer allows a node to list the pods bound to it: the
	// field selector decides.
	node := as("system:node:n1", "Impersonate-Group", "system:nodes")
	for _, r := range []read{
		{"list", "pods", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"},
		{"watch", "pods", "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1"},
		{"list", "pods", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2"},
		{"list", "pods", "/api/v1/pods"},
	} {
		t.Run("kubelet as system:node:n1/"+r.path, func(t *testing.T) {
			f.same(t, "kubelet", node, r)
		})
	}
	// Without impersonating it is the ServiceAccount, which may read no
	// pods at all.
	t.Run("kubelet itself/list own node's pods", func(t *testing.T) {
		f.same(t, "kubelet", nil, read{"list", "pods", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"})
	})
}

// read is one request of the table: its verb, resource and path.
type read struct{ verb, resource, path string }

// same sends one read both ways and compares the replies. informerd must
// have answered it itself (its request metric for the resource, verb and
// code grew), or the comparison would prove nothing.
func (f *authzFixture) same(t *testing.T, sa string, h http.Header, r read) {
	t.Helper()
	watch := r.verb == "watch"
	direct := ask(t, f.directHTTP, env.Config.Host, f.tokens[sa], h, r.path, watch)
	before := f.answered(t, r.resource, r.verb, direct.Code)
	cached := ask(t, f.cachedHTTP, f.d.KubeAPIURL(), f.tokens[sa], h, r.path, watch)
	if diff := cmp.Diff(direct, cached); diff != "" {
		t.Fatalf("GET %s as %s %v: informerd differs from the API server (-direct +informerd):\n%s", r.path, sa, h, diff)
	}
	// A watch is counted when informerd notices its client left.
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("informerd to count the %s of %s it answered with %d", r.verb, r.resource, direct.Code), func() bool {
		return f.answered(t, r.resource, r.verb, direct.Code) == before+1
	})
}

// answered returns how many requests for resource with verb informerd
// answered itself with code, from its metrics.
func (f *authzFixture) answered(t testing.TB, resource, verb string, code int) int {
	t.Helper()
	resp, err := http.Get(f.d.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	series := fmt.Sprintf(`informerd_kube_api_requests_total{code="%d",resource=%q,verb=%q} `, code, resource, verb)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	return 0
}

// kubectlAs: `kubectl --as` reads through informerd what it reads from
// the API server, and is refused what the API server refuses, in the same
// words.
func kubectlAs(t *testing.T, f *authzFixture) {
	k := &kubeAPI{kubectlCache: filepath.Join(f.dir, "kubectl-cache")}
	direct := writeKubeconfig(t, filepath.Join(f.dir, "direct"), env.Config.Host, env.Config.CAData, f.tokens["imp"], f.ns)
	cached := writeKubeconfig(t, filepath.Join(f.dir, "cached"), f.d.KubeAPIURL(), f.ca, f.tokens["imp"], f.ns)
	for _, args := range [][]string{
		{"--as=boss", "get", "secrets", "-o", "name"},
		{"--as=boss", "get", "secret", "s1", "-o", "jsonpath={.metadata.name}"},
		{"--as=tenant", "get", "secrets", "-o", "name"},
		{"--as=tenant", "get", "configmaps", "-o", "name"},
		{"--as=boss", "--as-group=system:masters", "get", "secrets", "-o", "name"},
		{"--as=nobody", "get", "configmaps", "-o", "name"},
		{"get", "configmaps", "-o", "name"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			d := k.kubectl(t, direct, "", args...)
			c := k.kubectl(t, cached, "", args...)
			if diff := cmp.Diff(d, c); diff != "" {
				t.Errorf("kubectl %s: informerd differs from the API server (-direct +informerd):\n%s", strings.Join(args, " "), diff)
			}
		})
	}
}

// auditOfCachedReads: a cached read is in informerd's audit log as the
// API server logs the same read: the caller, the impersonated user, the
// verb, the object, the code, the decision; the API server never sees it.
// A forwarded write from 127.0.0.2 shows that address first among the
// API server's sourceIPs.
func auditOfCachedReads(t *testing.T, f *authzFixture) {
	boss := http.Header{"Impersonate-User": {"boss"}}
	path := "/api/v1/namespaces/" + f.ns + "/secrets/s1"
	boss.Set("User-Agent", "audit-check/direct")
	if r := ask(t, f.directHTTP, env.Config.Host, f.tokens["imp"], boss, path, false); r.Code != http.StatusOK {
		t.Fatalf("direct read as boss: %+v", r)
	}
	boss.Set("User-Agent", "audit-check/cached")
	if r := ask(t, f.cachedHTTP, f.d.KubeAPIURL(), f.tokens["imp"], boss, path, false); r.Code != http.StatusOK {
		t.Fatalf("cached read as boss: %+v", r)
	}
	apiserver := testenv.ReadAuditEvents(t, env.AuditLog())
	informerd := testenv.ReadAuditEvents(t, f.auditLog)
	d := byAgent(apiserver, "audit-check/direct")
	c := byAgent(informerd, "audit-check/cached")
	if len(d) != 1 || len(c) != 1 {
		t.Fatalf("events of the read: %d at the API server, %d at informerd; want one each", len(d), len(c))
	}
	if n := len(byAgent(apiserver, "audit-check/cached")); n != 0 {
		t.Errorf("the cached read reached the API server (%d events)", n)
	}
	if diff := cmp.Diff(auditFacts(d[0]), auditFacts(c[0])); diff != "" {
		t.Errorf("informerd's audit event differs from the API server's (-apiserver +informerd):\n%s", diff)
	}

	// A forwarded write, from another loopback address.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	from2 := httpClient(t, &rest.Config{Host: f.d.KubeAPIURL(), TLSClientConfig: rest.TLSClientConfig{CAData: f.ca}, Dial: dialer.DialContext})
	req, err := http.NewRequest(http.MethodPost, f.d.KubeAPIURL()+"/api/v1/namespaces/"+f.ns+"/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"forwarded"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.tokens["imp"])
	req.Header.Set("Impersonate-User", "boss")
	req.Header.Set("User-Agent", "audit-check/forwarded")
	resp, err := from2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("forwarded create as boss: %d", resp.StatusCode)
	}
	fwd := byAgent(testenv.ReadAuditEvents(t, env.AuditLog()), "audit-check/forwarded")
	if len(fwd) != 1 {
		t.Fatalf("%d API server events for the forwarded create, want 1", len(fwd))
	}
	if ips := fwd[0].SourceIPs; len(ips) == 0 || ips[0] != "127.0.0.2" {
		t.Errorf("the API server logged sourceIPs %v for a request from 127.0.0.2 through informerd", ips)
	}
	if u := fwd[0].ImpersonatedUser; u == nil || u.Username != "boss" {
		t.Errorf("the API server logged impersonated user %v, want boss", u)
	}
}

// byAgent returns the complete events of requests sent with user agent ua.
func byAgent(events []auditv1.Event, ua string) []auditv1.Event {
	var out []auditv1.Event
	for _, e := range events {
		if e.UserAgent == ua && e.Stage == auditv1.StageResponseComplete {
			out = append(out, e)
		}
	}
	return out
}

// auditFacts is what an audit reader relies on in an event.
type auditFact struct {
	Level                  auditv1.Level
	User, Impersonated     string
	Groups, ImpersonatedAs []string
	Verb, RequestURI       string
	Object                 auditv1.ObjectReference
	Code                   int32
	Decision               string
	SourceIPs              []string
}

func auditFacts(e auditv1.Event) auditFact {
	f := auditFact{
		Level: e.Level, User: e.User.Username, Groups: e.User.Groups, Verb: e.Verb, RequestURI: e.RequestURI,
		Decision: e.Annotations["authorization.k8s.io/decision"], SourceIPs: e.SourceIPs,
	}
	if e.ImpersonatedUser != nil {
		f.Impersonated, f.ImpersonatedAs = e.ImpersonatedUser.Username, e.ImpersonatedUser.Groups
	}
	if e.ObjectRef != nil {
		f.Object = *e.ObjectRef
	}
	if e.ResponseStatus != nil {
		f.Code = e.ResponseStatus.Code
	}
	return f
}
