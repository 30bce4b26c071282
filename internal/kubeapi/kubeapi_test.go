package kubeapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// testTimeout bounds a test's calls to the API server and to informerd: a
// call that hangs fails its test, naming the call, instead of running into
// the package's timeout.
const testTimeout = 2 * time.Minute

// testContext is the test's context, ended after testTimeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

var (
	runsMu sync.Mutex
	runs   = map[string]int{}
)

// namespace returns base for the first run of a test in this process and
// base-N for its Nth (go test -count=N): the test control plane has no
// namespace controller, so a namespace, once created, stays.
func namespace(base string) string {
	runsMu.Lock()
	defer runsMu.Unlock()
	runs[base]++
	if n := runs[base]; n > 1 {
		return fmt.Sprintf("%s-%d", base, n)
	}
	return base
}

// fixture is informerd's Kubernetes API over the caches of configmaps and
// pods (indexed by node), served on a TLS port with HTTP/2, next to the
// real API server: the same client is pointed at both.
type fixture struct {
	direct, cached *kubernetes.Clientset
	cachedConfig   *rest.Config
	set            *pipeline.Set
	handler        *kubeapi.Handler
}

func setup(t *testing.T, ns string) *fixture {
	t.Helper()
	return setupWith(t, ns, `
transform: {stripManagedFields: false}
resources:
  - resource: configmaps
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
`)
}

// setupWith is setup with the configuration yaml.
func setupWith(t *testing.T, ns, yaml string) *fixture {
	t.Helper()
	return setupUpstream(t, ns, yaml, env.Config)
}

// setupUpstream is setupWith, the handler reaching the API server through
// upstream (the caches always read it directly); tune, if any, changes the
// handler's options.
func setupUpstream(t *testing.T, ns, yaml string, upstream *rest.Config, tune ...func(*kubeapi.Options)) *fixture {
	t.Helper()
	direct := kubernetes.NewForConfigOrDie(env.Config)
	ctx := testContext(t)
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := pipeline.NewSet(c, env.Config, log)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, set)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := set.WaitSynced(sctx); err != nil {
		t.Fatal(err)
	}
	o := kubeapi.Options{Caches: set, Upstream: upstream, Log: log}
	for _, f := range tune {
		f(&o)
	}
	h, err := kubeapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(func() {
		h.Stop()
		testenv.Within(t, time.Minute, "informerd's server to close (it waits for every request being served)", srv.Close)
	})
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(srv)}}
	return &fixture{direct: direct, cached: kubernetes.NewForConfigOrDie(cfg), cachedConfig: cfg, set: set, handler: h}
}

func certPEM(srv *httptest.Server) []byte {
	return []byte("-----BEGIN CERTIFICATE-----\n" + b64(srv.Certificate().Raw) + "\n-----END CERTIFICATE-----\n")
}

// summary is what a client sees of an object, for comparing informerd's
// answers with the API server's.
type summary struct {
	Name, RV string
	Data     map[string]string
}

func configMaps(l *corev1.ConfigMapList) []summary {
	var out []summary
	for _, c := range l.Items {
		out = append(out, summary{c.Name, c.ResourceVersion, c.Data})
	}
	return out
}

// waitRV waits until informerd's cache of resource has reached rv.
func (f *fixture) waitRV(t *testing.T, resource, rv string) {
	t.Helper()
	p, ok := f.set.Lookup(resource)
	if !ok {
		t.Fatalf("no resource %s", resource)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Cache().WaitFor(ctx, rv); err != nil {
		t.Fatal(err)
	}
}

func TestListGetAsTheAPIServer(t *testing.T) {
	ns := namespace("kapi-list")
	f := setup(t, ns)
	ctx := testContext(t)
	var last string
	for i := range 7 {
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i), Labels: map[string]string{"app": []string{"web", "db"}[i%2]}},
			Data:       map[string]string{"i": fmt.Sprint(i)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)

	for _, tc := range []struct {
		name string
		opts metav1.ListOptions
	}{
		{"all", metav1.ListOptions{}},
		{"label selector", metav1.ListOptions{LabelSelector: "app=web"}},
		{"set-based label selector", metav1.ListOptions{LabelSelector: "app in (db),app!=web"}},
		{"field selector on name", metav1.ListOptions{FieldSelector: "metadata.name=cm3"}},
		{"field selector on namespace", metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns}},
		{"not-equal on name", metav1.ListOptions{FieldSelector: "metadata.name!=cm3"}},
		{"resourceVersion 0", metav1.ListOptions{ResourceVersion: "0"}},
		{"not older than", metav1.ListOptions{ResourceVersion: last, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := f.direct.CoreV1().ConfigMaps(ns).List(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(configMaps(want), configMaps(got)); diff != "" {
				t.Errorf("list through informerd (-api server +informerd):\n%s", diff)
			}
			if got.ResourceVersion == "" {
				t.Error("list has no resourceVersion")
			}
		})
	}

	t.Run("pages of one snapshot", func(t *testing.T) {
		var got []summary
		opts := metav1.ListOptions{Limit: 3}
		first := ""
		for pages := 0; ; pages++ {
			l, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = l.ResourceVersion
				// A write between pages must not show in them.
				if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-between"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if l.ResourceVersion != first {
				t.Errorf("page %d at resourceVersion %s, the first at %s", pages, l.ResourceVersion, first)
			}
			got = append(got, configMaps(l)...)
			if l.Continue == "" {
				break
			}
			opts.Continue = l.Continue
		}
		want, err := f.direct.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: first, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(configMaps(want), got); diff != "" {
			t.Errorf("pages through informerd (-api server at %s +informerd):\n%s", first, diff)
		}
	})

	t.Run("get", func(t *testing.T) {
		want, err := f.direct.CoreV1().ConfigMaps(ns).Get(ctx, "cm2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.cached.CoreV1().ConfigMaps(ns).Get(ctx, "cm2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("get through informerd (-api server +informerd):\n%s", diff)
		}
		_, err = f.cached.CoreV1().ConfigMaps(ns).Get(ctx, "absent", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get of an absent object = %v, want NotFound", err)
		}
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Details.Name != "absent" {
			t.Errorf("NotFound details = %+v, want the name", st.Status().Details)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts metav1.ListOptions
			is   func(error) bool
		}{
			{"malformed label selector", metav1.ListOptions{LabelSelector: "app in (("}, apierrors.IsBadRequest},
			{"unindexed field", metav1.ListOptions{FieldSelector: "data.i=1"}, apierrors.IsBadRequest},
			{"continue from elsewhere", metav1.ListOptions{Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"}, apierrors.IsBadRequest},
			{"match without resourceVersion", metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}, apierrors.IsInvalid},
			{"non-numeric resourceVersion", metav1.ListOptions{ResourceVersion: "abc", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, apierrors.IsBadRequest},
			{"exact, older than the history", metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, apierrors.IsResourceExpired},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, tc.opts)
				if !tc.is(err) {
					t.Errorf("list = %v, want the API server's status", err)
				}
			})
		}
	})
}

func TestFieldSelectorThroughIndex(t *testing.T) {
	ns := namespace("kapi-index")
	f := setup(t, ns)
	ctx := testContext(t)
	var last string
	for i := range 4 {
		p, err := f.direct.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%2), Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = p.ResourceVersion
	}
	f.waitRV(t, "pods", last)
	for _, sel := range []string{"spec.nodeName=n1", "spec.nodeName!=n1", "spec.nodeName=n0,metadata.name=p2", "spec.nodeName=absent"} {
		want, err := f.direct.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.cached.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(podNames(want), podNames(got)); diff != "" {
			t.Errorf("%s (-api server +informerd):\n%s", sel, diff)
		}
	}
}

func podNames(l *corev1.PodList) []string {
	var out []string
	for _, p := range l.Items {
		out = append(out, p.Name+"@"+p.ResourceVersion)
	}
	return out
}

// event is what a client sees of a watch event.
type event struct {
	Type watch.EventType
	Name string
	RV   string
}

func collect(t *testing.T, w watch.Interface, n int) []event {
	t.Helper()
	defer w.Stop()
	var out []event
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error %v after %v", apierrors.FromObject(ev.Object), out)
			}
			cm := ev.Object.(*corev1.ConfigMap)
			out = append(out, event{ev.Type, cm.Name, cm.ResourceVersion})
		case <-timeout:
			t.Fatalf("watch: %d events after 30s, want %d: %v", len(out), n, out)
		}
	}
	return out
}

func TestWatchAsTheAPIServer(t *testing.T) {
	ns := namespace("kapi-watch")
	f := setup(t, ns)
	ctx := testContext(t)
	start, err := f.direct.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRV(t, "configmaps", start.ResourceVersion)
	opts := metav1.ListOptions{ResourceVersion: start.ResourceVersion, LabelSelector: "app=web", AllowWatchBookmarks: true}
	direct, err := f.direct.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := f.cached.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cms := f.direct.CoreV1().ConfigMaps(ns)
	mustCM := func(_ *corev1.ConfigMap, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustCM(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{}))
	mustCM(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "db"}}}, metav1.CreateOptions{}))
	// b enters the selection (ADDED), a leaves it (DELETED), a comes back.
	mustCM(cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "web"}}}, metav1.UpdateOptions{}))
	mustCM(cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "db"}}}, metav1.UpdateOptions{}))
	mustCM(cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}))
	if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := collect(t, direct, 5)
	got := collect(t, cached, 5)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watch through informerd (-api server +informerd):\n%s", diff)
	}

	t.Run("too old resourceVersion is 410 Expired", func(t *testing.T) {
		p, _ := f.set.Lookup("configmaps")
		floor := p.Cache().Stats().HistoryFloor
		if floor <= 1 {
			t.Skipf("history floor %d: every resourceVersion is in the window", floor)
		}
		w, err := f.cached.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("watch from 1 = %v, want 410", err)
			}
			return
		}
		defer w.Stop()
		ev := testenv.Receive(t, 30*time.Second, "the first event of a watch from resourceVersion 1", w.ResultChan())
		if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
			t.Fatalf("watch from 1: first event %s %v, want ERROR 410 Expired", ev.Type, ev.Object)
		}
	})
}

func TestStreamingListInformer(t *testing.T) {
	ns := namespace("kapi-informer")
	f := setup(t, ns)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	for i := range 3 {
		if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// client-go v0.37 informers list with a streaming watch (WatchList)
	// by default: sendInitialEvents=true, ending at the bookmark annotated
	// k8s.io/initial-events-end.
	var mu sync.Mutex
	var requests []string
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}
	cfg := rest.CopyConfig(f.cachedConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			requests = append(requests, r.URL.RawQuery)
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		t.Fatalf("informer through informerd did not sync; requests: %v", sent())
	}
	if !slices.ContainsFunc(sent(), func(q string) bool { return strings.Contains(q, "sendInitialEvents=true") }) {
		t.Errorf("the informer did not use a streaming list; requests: %v", sent())
	}
	if n := len(inf.GetStore().ListKeys()); n != 3 {
		t.Errorf("informer holds %d configmaps, want 3", n)
	}
	cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the informer to see a new configmap", func() bool {
		o, ok, _ := inf.GetStore().GetByKey(ns + "/later")
		return ok && o.(*corev1.ConfigMap).ResourceVersion == cm.ResourceVersion
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestForwardedWithTheCallersToken(t *testing.T) {
	ns := namespace("kapi-forward")
	f := setup(t, ns)
	ctx := testContext(t)
	token := serviceAccountToken(t, f.direct, ns, "writer", "create", "get", "list", "watch")
	withToken := rest.CopyConfig(f.cachedConfig)
	withToken.BearerToken = token
	writer := kubernetes.NewForConfigOrDie(withToken)

	if _, err := writer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through informerd with a token: %v", err)
	}
	if _, err := f.direct.CoreV1().ConfigMaps(ns).Get(ctx, "written", metav1.GetOptions{}); err != nil {
		t.Errorf("the forwarded create did not reach the API server: %v", err)
	}
	// The caller's own permissions apply, not informerd's.
	_, err := writer.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create of a secret the caller may not create = %v, want Forbidden", err)
	}
	// No token: refused with a reason, never sent with informerd's own.
	_, err = f.cached.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "anonymous"}}, metav1.CreateOptions{})
	if !apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), "bearer token") {
		t.Errorf("create without a token = %v, want 401 saying a token is needed", err)
	}
}

func TestDiscovery(t *testing.T) {
	f := setup(t, namespace("kapi-discovery"))
	want, err := f.direct.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.cached.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("discovery through informerd: %d group-versions, the API server %d", len(got), len(want))
	}
	v, err := f.cached.Discovery().ServerVersion()
	if err != nil || v.GitVersion == "" {
		t.Errorf("/version through informerd = %v, %v", v, err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// serviceAccountToken creates ServiceAccount name in ns, bound to a Role
// with verbs on configmaps, and returns a token for the API server once the
// API server authorizes it: its RBAC authorizer reads the new Role and
// RoleBinding from informers, and refuses the token until they arrive.
func serviceAccountToken(t *testing.T, kube *kubernetes.Clientset, ns, name string, verbs ...string) string {
	t.Helper()
	ctx := testContext(t)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	as := kubernetes.NewForConfigOrDie(cfg)
	testenv.Eventually(t, time.Minute, fmt.Sprintf("the API server to authorize ServiceAccount %s to %v configmaps", name, verbs), func() bool {
		for _, verb := range verbs {
			r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps"}},
			}, metav1.CreateOptions{})
			if err != nil || !r.Status.Allowed {
				return false
			}
		}
		return true
	})
	return tr.Status.Token
}

// TestControllerRuntimeManager runs an unmodified controller-runtime
// manager against informerd: its cache reads through informerd's watch,
// its writes are forwarded with its token.
func TestControllerRuntimeManager(t *testing.T) {
	ns := namespace("kapi-manager")
	f := setup(t, ns)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	if _, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(f.cachedConfig)
	cfg.BearerToken = serviceAccountToken(t, f.direct, ns, "manager", "get", "list", "watch", "create")
	mgr, err := manager.New(cfg, manager.Options{
		Cache:                  crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		// controller-runtime's Manager.Start does not return when its
		// context ends before its caches have synced.
		if err := testenv.Receive(t, time.Minute, "the manager to stop", done); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	c := mgr.GetClient()
	var cms corev1.ConfigMapList
	testenv.Eventually(t, time.Minute, "the manager's cache to list through informerd", func() bool {
		return c.List(sctx, &cms, crclient.InNamespace(ns)) == nil && len(cms.Items) == 1
	})
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created", Namespace: ns}}); err != nil {
		t.Fatalf("create through the manager's client (forwarded): %v", err)
	}
	testenv.Eventually(t, time.Minute, "the manager's cache to see its own write", func() bool {
		var cm corev1.ConfigMap
		return c.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "created"}, &cm) == nil
	})
}

// TestLimits refuses a list past its caller's rate with the API server's
// 429 and a Retry-After, which client-go honours.
func TestLimits(t *testing.T) {
	ns := namespace("kapi-limits")
	f := setup(t, ns)
	h, err := kubeapi.New(kubeapi.Options{
		Caches: f.set, Upstream: env.Config,
		Limits: limits.New(limits.Options{ListRate: 0.01, ListBurst: 1, MaxQueueWait: time.Millisecond}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute}
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Get(srv.URL + "/api/v1/namespaces/" + ns + "/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		// Read to the end, so the next request reuses the connection: with
		// --auth-mode none, a connection is a client.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first list: HTTP %d", resp.StatusCode)
	}
	resp := get()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second list at once: HTTP %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestPartialCacheIsForwarded: a cache the configuration narrows to one
// namespace answers for that namespace only; a read of another, or of all
// namespaces, goes to the API server (here refused, for want of a token),
// never an incomplete answer from the cache.
func TestPartialCacheIsForwarded(t *testing.T) {
	ns := namespace("kapi-narrow")
	f := setupWith(t, ns, "resources: [{resource: configmaps, namespace: "+ns+"}]")
	ctx := testContext(t)
	if _, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list of the cached namespace: %v", err)
	}
	for _, other := range []string{"default", ""} {
		_, err := f.cached.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), "forwards") {
			t.Errorf("list of namespace %q: %v, want it forwarded (and refused without a token)", other, err)
		}
	}
}
