package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/testenv"
)

// The defects of issue 33, each against the real API server: the same
// request to both, the same answer.

const scopeConfig = `
transform: {stripManagedFields: false}
resources:
  - resource: configmaps
  - resource: namespaces
`

// adminToken returns a bearer token of a ServiceAccount bound to
// cluster-admin, for requests informerd may forward.
func adminToken(t *testing.T, kube *kubernetes.Clientset, ns string) string {
	t.Helper()
	ctx := testContext(t)
	name := "admin-" + ns
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "admin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "admin", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "admin", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// rawAnswer is an HTTP answer, read whole.
type rawAnswer struct {
	code        int
	contentType string
	retryAfter  string
	body        []byte
}

// raw sends GET path (with its query) to the server of cfg with accept.
func raw(t *testing.T, cfg *rest.Config, path, accept string) rawAnswer {
	t.Helper()
	a, err := rawGet(testContext(t), cfg, path, accept)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// rawGet is raw for any goroutine.
func rawGet(ctx context.Context, cfg *rest.Config, path, accept string) (rawAnswer, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return rawAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return rawAnswer{}, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return rawAnswer{}, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawAnswer{}, fmt.Errorf("GET %s: %w", path, err)
	}
	return rawAnswer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), retryAfter: resp.Header.Get("Retry-After"), body: body}, nil
}

// listShape is what must agree between two answers to one list: the items
// (namespace/name), whether each has a kind, and the list's paging fields.
type listShape struct {
	Items     []string
	KindItems int
	Continue  bool
	Remaining *int64
}

func shapeOf(t *testing.T, a rawAnswer) listShape {
	t.Helper()
	var l struct {
		Metadata struct {
			Continue           string `json:"continue"`
			RemainingItemCount *int64 `json:"remainingItemCount"`
		} `json:"metadata"`
		Items []map[string]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil {
		t.Fatalf("not a list (HTTP %d): %v: %s", a.code, err, a.body)
	}
	s := listShape{Continue: l.Metadata.Continue != "", Remaining: l.Metadata.RemainingItemCount}
	for _, it := range l.Items {
		var m metav1.ObjectMeta
		_ = json.Unmarshal(it["metadata"], &m)
		s.Items = append(s.Items, m.Namespace+"/"+m.Name)
		if _, ok := it["kind"]; ok {
			s.KindItems++
		}
	}
	return s
}

func TestScopeFromDiscovery(t *testing.T) {
	ns := namespace("kapi-scope")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	other := ns + "-other"
	if _, err := f.direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	for _, n := range []string{ns, other} {
		cm, err := f.direct.CoreV1().ConfigMaps(n).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "twin"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)
	withToken := rest.CopyConfig(f.cachedConfig)
	withToken.BearerToken = adminToken(t, f.direct, ns)

	t.Run("a Namespace at its own path", func(t *testing.T) {
		want, err := f.direct.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.cached.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace %s through informerd: %v", ns, err)
		}
		if got.Name != want.Name || got.ResourceVersion != want.ResourceVersion {
			t.Errorf("namespace through informerd %s@%s, the API server %s@%s", got.Name, got.ResourceVersion, want.Name, want.ResourceVersion)
		}
	})
	t.Run("the legacy watch of one Namespace", func(t *testing.T) {
		hc, err := rest.HTTPClientFor(f.cachedConfig)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.cachedConfig.Host+"/api/v1/watch/namespaces/"+ns+"?resourceVersion=0", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		if err != nil {
			t.Fatalf("watch of namespace %s: HTTP %d, %v", ns, resp.StatusCode, err)
		}
		var ev struct {
			Type   string
			Object corev1.Namespace
		}
		if err := json.Unmarshal(line, &ev); err != nil || ev.Type != "ADDED" || ev.Object.Name != ns {
			t.Errorf("first event of the watch of namespace %s = %s, want ADDED %s", ns, line, ns)
		}
	})
	t.Run("a name selector across namespaces", func(t *testing.T) {
		opts := metav1.ListOptions{FieldSelector: "metadata.name=twin"}
		want, err := f.direct.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.cached.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		sameAs(t, "configmaps named twin in every namespace", configMaps(want), configMaps(got))
		if len(got.Items) < 2 {
			t.Errorf("%d configmaps named twin through informerd, want at least 2", len(got.Items))
		}
	})
	t.Run("a cluster-scoped resource under a namespace", func(t *testing.T) {
		for _, p := range []string{"/api/v1/namespaces/" + ns + "/namespaces", "/api/v1/namespaces/" + ns + "/namespaces/" + ns} {
			want, got := raw(t, env.Config, p, ""), raw(t, withToken, p, "")
			if got.code != want.code || want.code != http.StatusNotFound {
				t.Errorf("GET %s: informerd %d, the API server %d (want 404 from both)", p, got.code, want.code)
			}
		}
	})
}

func TestReadParameters(t *testing.T) {
	ns := namespace("kapi-params")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	var last string
	for _, n := range []string{"a", "b", "c"} {
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)
	base := "/api/v1/namespaces/" + ns + "/configmaps"

	for _, c := range []struct{ name, path string }{
		{"get with resourceVersion=0 and pretty", base + "/a?resourceVersion=0&pretty=true"},
		{"get with resourceVersion", base + "/a?resourceVersion=" + last},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, got := raw(t, env.Config, c.path, ""), raw(t, f.cachedConfig, c.path, "")
			if got.code != want.code || got.code != http.StatusOK {
				t.Errorf("GET %s: informerd %d %s, the API server %d", c.path, got.code, got.body, want.code)
			}
		})
	}
	for _, c := range []struct{ name, path string }{
		{"limit=-1 is no limit", base + "?limit=-1"},
		{"resourceVersion=0 ignores limit", base + "?limit=1&resourceVersion=0"},
		{"remainingItemCount", base + "?limit=1"},
		{"remainingItemCount with a selector", base + "?limit=1&labelSelector=x!=y"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, got := raw(t, env.Config, c.path, ""), raw(t, f.cachedConfig, c.path, "")
			if got.code != want.code {
				t.Fatalf("GET %s: informerd %d %s, the API server %d %s", c.path, got.code, got.body, want.code, want.body)
			}
			sameAs(t, "GET "+c.path, shapeOf(t, want), shapeOf(t, got))
		})
	}
	t.Run("timeout=invalid", func(t *testing.T) {
		p := base + "?timeout=invalid"
		want, got := raw(t, env.Config, p, ""), raw(t, f.cachedConfig, p, "")
		if got.code != want.code || got.code != http.StatusBadRequest {
			t.Errorf("GET %s: informerd %d, the API server %d (want 400)", p, got.code, want.code)
		}
	})
	t.Run("YAML", func(t *testing.T) {
		want, got := raw(t, env.Config, base+"/a", "application/yaml"), raw(t, f.cachedConfig, base+"/a", "application/yaml")
		if got.code != http.StatusOK || got.contentType != want.contentType {
			t.Fatalf("YAML get: informerd %d %q, the API server %d %q", got.code, got.contentType, want.code, want.contentType)
		}
		var w, g corev1.ConfigMap
		if err := yaml.Unmarshal(want.body, &w); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(got.body, &g); err != nil {
			t.Fatalf("informerd's YAML: %v: %s", err, got.body)
		}
		if g.Name != w.Name || g.ResourceVersion != w.ResourceVersion {
			t.Errorf("YAML: informerd %s@%s, the API server %s@%s", g.Name, g.ResourceVersion, w.Name, w.ResourceVersion)
		}
	})
	t.Run("timeoutSeconds=0 is the default", func(t *testing.T) {
		w, err := f.cached.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: last, TimeoutSeconds: ptr.To[int64](0)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatal("the watch with timeoutSeconds=0 ended before the next change")
		}
		if m, _ := ev.Object.(*corev1.ConfigMap); m == nil || m.ResourceVersion != cm.ResourceVersion {
			t.Errorf("first event %s %v, want ADDED of after@%s", ev.Type, ev.Object, cm.ResourceVersion)
		}
	})
}

func TestNotOlderThanAnotherResource(t *testing.T) {
	ns := namespace("kapi-notolder")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	// A write to a resource informerd does not cache moves the API
	// server's resourceVersion; the configmaps' cache sees nothing of it.
	s, err := f.direct.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, match := range []metav1.ResourceVersionMatch{"", metav1.ResourceVersionMatchNotOlderThan} {
		l, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: s.ResourceVersion, ResourceVersionMatch: match})
		if err != nil {
			t.Fatalf("list not older than a Secret's resourceVersion (match %q): %v, want the API server's 200", match, err)
		}
		if rvLess(l.ResourceVersion, s.ResourceVersion) {
			t.Errorf("list at %s, older than the %s asked for", l.ResourceVersion, s.ResourceVersion)
		}
	}
	if _, err := f.cached.CoreV1().ConfigMaps(ns).Get(ctx, "missing", metav1.GetOptions{ResourceVersion: s.ResourceVersion}); !apierrors.IsNotFound(err) {
		t.Errorf("get not older than a Secret's resourceVersion = %v, want the API server's 404", err)
	}
}

func TestConsistentReadOfAQuietResource(t *testing.T) {
	ns := namespace("kapi-quiet")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	for i := range 3 {
		s, err := f.direct.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Consistent: the cache is proven current past the write, though
		// none of its events says so.
		l, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("consistent list of a quiet resource: %v", err)
		}
		if rvLess(l.ResourceVersion, s.ResourceVersion) {
			t.Errorf("consistent list at %s, before the write at %s that preceded it", l.ResourceVersion, s.ResourceVersion)
		}
	}
}

// The API server indents JSON for pretty=true and for a Status it cannot
// encode as the Accept header asks (a Table only); informerd the same
// bytes: json.Indent of the compact answer.
func TestPresentation(t *testing.T) {
	ns := namespace("kapi-pretty")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "<v>"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := "/api/v1/namespaces/" + ns + "/configmaps"
	indented := func(b []byte) []byte {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			t.Fatalf("not JSON: %v: %s", err, b)
		}
		return out.Bytes()
	}
	for _, path := range []string{p + "?resourceVersion=0", p + "/a"} {
		plain := raw(t, f.cachedConfig, path, "")
		sep := "&"
		if !strings.Contains(path, "?") {
			sep = "?"
		}
		pretty := raw(t, f.cachedConfig, path+sep+"pretty=true", "")
		if plain.code != http.StatusOK || pretty.code != http.StatusOK {
			t.Fatalf("GET %s: %d, pretty %d", path, plain.code, pretty.code)
		}
		if bytes.Contains(plain.body, []byte("\n ")) {
			t.Errorf("GET %s without pretty is indented: %s", path, plain.body)
		}
		if want := indented(plain.body); !bytes.Equal(pretty.body, want) {
			t.Errorf("GET %s?pretty=true:\n%s\nwant\n%s", path, pretty.body, want)
		}
	}
	const tableOnly = "application/json;as=Table;v=v1;g=meta.k8s.io"
	missing := raw(t, f.cachedConfig, p+"/absent", tableOnly)
	if missing.code != http.StatusNotFound || !bytes.Contains(missing.body, []byte("\n  \"kind\": \"Status\"")) {
		t.Errorf("404 for a Table-only request: %d %s, want an indented Status", missing.code, missing.body)
	}
	if got := raw(t, f.cachedConfig, p+"/absent", ""); bytes.Contains(got.body, []byte("\n ")) {
		t.Errorf("404 for a JSON request is indented: %s", got.body)
	}
}

// A continue token lives as long as the API server's would before etcd
// compacts its resourceVersion (--continue-lifetime), though the cache
// still holds the snapshot: then 410 Expired with an inconsistent token
// that continues after the last key, with remainingItemCount counting
// from there.
func TestContinueTokenLifetime(t *testing.T) {
	ns := namespace("kapi-lifetime")
	const lifetime = 2 * time.Second
	f := setupUpstream(t, ns, scopeConfig, env.Config, func(o *kubeapi.Options) { o.ContinueLifetime = lifetime })
	ctx := testContext(t)
	for i := range 6 {
		if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms := f.cached.CoreV1().ConfigMaps(ns)
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	second, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if err != nil {
		t.Fatalf("continue within the token's lifetime: %v", err)
	}
	if second.ResourceVersion != first.ResourceVersion {
		t.Errorf("second page at %s, the first at %s: one snapshot", second.ResourceVersion, first.ResourceVersion)
	}
	time.Sleep(lifetime + 1100*time.Millisecond) // the token counts whole seconds
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: second.Continue})
	var status apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &status) || status.Status().ListMeta.Continue == "" {
		t.Fatalf("continue after the token's lifetime: %v, want 410 Expired with an inconsistent continue token", err)
	}
	rest, err := cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: status.Status().ListMeta.Continue})
	if err != nil {
		t.Fatalf("inconsistent continue: %v", err)
	}
	if len(rest.Items) != 1 || rest.Items[0].Name != "c4" {
		t.Errorf("inconsistent continue: %d items (%+v), want c4, after the last key sent", len(rest.Items), rest.Items)
	}
	if rest.RemainingItemCount == nil || *rest.RemainingItemCount != 1 {
		t.Errorf("inconsistent continue's remainingItemCount: %v, want 1 (c5)", rest.RemainingItemCount)
	}
}

// A reader that asks for a resourceVersion far ahead of the API server
// waits out its timeout (504, as from the API server); consistent reads of
// the same quiet resource while it waits are proven and served, not
// refused.
func TestConsistentReadsBesideAReadAheadOfTheAPIServer(t *testing.T) {
	ns := namespace("kapi-ahead")
	f := setupWith(t, ns, scopeConfig)
	ctx := testContext(t)
	s, err := f.direct.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseUint(s.ResourceVersion, 10, 64)
	p := "/api/v1/namespaces/" + ns + "/configmaps"
	type answer struct {
		rawAnswer
		err error
	}
	ahead := make(chan answer, 1)
	go func() {
		a, err := rawGet(ctx, f.cachedConfig, p+"?resourceVersionMatch=NotOlderThan&resourceVersion="+strconv.FormatUint(n+1_000_000, 10), "")
		ahead <- answer{a, err}
	}()
	for i := range 3 {
		if _, err := f.direct.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		st := time.Now()
		got := raw(t, f.cachedConfig, p, "")
		t.Logf("read %d: %d in %v", i, got.code, time.Since(st))
		if got.code != http.StatusOK {
			t.Errorf("consistent list %d beside a read ahead of the API server: %d %s, want 200", i, got.code, got.body)
		}
	}
	if got := <-ahead; got.err != nil {
		t.Error(got.err)
	} else if got.code != http.StatusGatewayTimeout {
		t.Errorf("list far ahead of the API server: %d %s, want 504", got.code, got.body)
	}
}

func TestConsistentReadWhenTheAPIServerCannotBeAsked(t *testing.T) {
	ns := namespace("kapi-cut")
	proxy, err := testenv.NewProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	f := setupUpstream(t, ns, scopeConfig, proxy.Config(env.Config))
	ctx := testContext(t)
	if _, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("consistent list with the API server reachable: %v", err)
	}
	proxy.Cut()
	p := "/api/v1/namespaces/" + ns + "/configmaps"
	got := raw(t, f.cachedConfig, p, "")
	if got.code != http.StatusTooManyRequests || got.retryAfter != "1" {
		t.Errorf("consistent list with the API server cut off: %d Retry-After %q %s, want 429 with Retry-After 1", got.code, got.retryAfter, got.body)
	}
	if got := raw(t, f.cachedConfig, p+"?resourceVersion=0", ""); got.code != http.StatusOK {
		t.Errorf("list with resourceVersion=0 with the API server cut off: %d, want 200 from the cache", got.code)
	}
}

// rvLess compares two resourceVersions as numbers.
func rvLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func sameAs[T any](t *testing.T, what string, want, got T) {
	t.Helper()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !slices.Equal(w, g) {
		t.Errorf("%s:\n informerd      %s\n the API server %s", what, g, w)
	}
}

// TestConsistentReadOfEvents: the API server keeps no watch cache of
// events, so no bookmark can prove a quiet events cache current. A
// consistent read informerd cannot serve in time is forwarded with the
// caller's token (the API server answers it from etcd), and refused with
// the 429 for a caller without one, or with --consistent-read-fallback
// refuse.
func TestConsistentReadOfEvents(t *testing.T) {
	ns := namespace("kapi-events")
	const cfg = "resources: [{resource: events}, {resource: configmaps}]"
	f := setupUpstream(t, ns, cfg, env.Config, func(o *kubeapi.Options) { o.ConsistentWait = time.Second })
	refuse := setupUpstream(t, namespace("kapi-events-refuse"), cfg, env.Config, func(o *kubeapi.Options) {
		o.ConsistentWait, o.ConsistentFallback = time.Second, kubeapi.FallbackRefuse
	})
	ctx := testContext(t)
	ev, err := f.direct.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"}, Reason: "R"}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRV(t, "events", ev.ResourceVersion)
	// Writes elsewhere move the API server past the quiet events cache.
	for i := range 3 {
		if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token := adminToken(t, f.direct, ns)
	withToken := rest.CopyConfig(f.cachedConfig)
	withToken.BearerToken = token
	path := "/api/v1/namespaces/" + ns + "/events"
	a := raw(t, withToken, path, "")
	if a.code != http.StatusOK || !bytes.Contains(a.body, []byte(`"name":"e1"`)) {
		t.Fatalf("a consistent list of events with a token: %d %s, want the API server's 200", a.code, a.body)
	}
	if a := raw(t, f.cachedConfig, path, ""); a.code != http.StatusTooManyRequests || a.retryAfter != "1" {
		t.Fatalf("without a token: %d, Retry-After %q, want 429 and 1", a.code, a.retryAfter)
	}
	rc := rest.CopyConfig(refuse.cachedConfig)
	rc.BearerToken = token
	if a := raw(t, rc, "/api/v1/namespaces/"+ns+"/events", ""); a.code != http.StatusTooManyRequests {
		t.Fatalf("with the fallback refuse: %d, want 429", a.code)
	}
}
