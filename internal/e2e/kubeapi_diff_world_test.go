package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/testenv"
)

// diffConfig caches, in every namespace, configmaps and pods (with the
// node index, so spec.nodeName selects), and the cluster-scoped
// namespaces, priorityclasses and clusterroles. clusterroles keep the
// default transform, the others say what the default should be: objects
// as the API server serves them. The history holds diffHistory events per
// resource, so that forgetHistory can push a snapshot out of it.
const diffConfig = `
resources:
  - resource: configmaps
    transform: {stripManagedFields: false}
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
    transform: {stripManagedFields: false}
  - resource: namespaces
    transform: {stripManagedFields: false}
  - resource: priorityclasses.scheduling.k8s.io
    transform: {stripManagedFields: false}
  - resource: clusterroles.rbac.authorization.k8s.io
history:
  maxEvents: 200
`

// diffHistory is diffConfig's history.maxEvents.
const diffHistory = 200

// The objects of the differential suite, made before informerd starts.
const (
	diffNS       = "informerd-diff"
	diffNS2      = "informerd-diff-2"
	diffPriority = "informerd-diff-pc"
	diffRole     = "informerd-diff-cr"
)

// diffWorld is informerd (diffConfig, TLS, --auth-mode none) next to the
// API server, the objects both serve, one ServiceAccount token both
// requests carry, and the values a case's query names ({rv}, ...). Its
// methods are called from the test's goroutine only.
type diffWorld struct {
	k              *kubeAPI // informerd and the API server's administrator
	token          string
	direct, cached *http.Client
	// vars are the placeholders of a case's path and query, and their
	// current values.
	vars map[string]string
	// last is the last write of a case's hooks: a watch reads until it
	// sees it.
	last lastWrite
	// unsettled are the writes informerd has still to show: resource →
	// resourceVersion written, and objects deleted.
	unsettled map[string]string
	deleted   []deletion
}

// lastWrite is the object of a write and the resourceVersion it left, or
// deleted.
type lastWrite struct {
	name, rv string
	deleted  bool
}

type deletion struct{ resource, ns, name string }

// startDiff makes the world of the differential suite (namespaces diffNS
// and diffNS2, configmaps with labels, pods without nodes, a
// PriorityClass and a ClusterRole), a ServiceAccount that may read it all
// and write configmaps and pods in diffNS, and runs informerd until the
// test ends.
func startDiff(t *testing.T) *diffWorld {
	t.Helper()
	ctx := context.Background()
	// The suite writes hundreds of times: past client-go's default rate.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{diffNS, diffNS2} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "diff"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token := clientToken(t, kube, diffNS)
	grantClusterRole(t, kube, "client-"+diffNS+"-cluster",
		[]rbacv1.Subject{{Kind: "ServiceAccount", Name: "client", Namespace: diffNS}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "list", "watch"}})

	for _, cm := range []struct {
		name   string
		labels map[string]string
	}{
		{"a", map[string]string{"app": "web", "tier": "front"}}, {"b", map[string]string{"app": "web", "tier": "back"}},
		{"c", map[string]string{"app": "db"}}, {"d", nil}, {"shared", map[string]string{"tier": "front"}},
	} {
		if _, err := kube.CoreV1().ConfigMaps(diffNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cm.name, Labels: cm.labels}, Data: map[string]string{"k": cm.name},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(diffNS2).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods without a kubelet: they stay Pending. p2 is bound to node n1,
	// which does not exist either.
	for _, p := range []struct{ name, node string }{{"p1", ""}, {"p2", "n1"}} {
		if _, err := kube.CoreV1().Pods(diffNS).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"app": p.name}},
			Spec:       corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: diffPriority, Labels: map[string]string{"team": "diff"}}, Value: 1000,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: diffRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	def, err := kube.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c, err := config.Parse([]byte(diffConfig))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := testenv.NewCA(t, "kube-api-diff-ca")
	cert, key := ca.Issue(t, "127.0.0.1", true)
	o := daemon.NewOptions()
	o.RestConfig, o.Config = env.Config, c
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
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

	w := &diffWorld{
		k:      &kubeAPI{ns: diffNS, kube: kube, d: d, kubectlCache: filepath.Join(dir, "kubectl-cache")},
		token:  token,
		direct: httpClient(t, &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}),
		cached: httpClient(t, &rest.Config{Host: d.KubeAPIURL(), TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM}}),
		vars: map[string]string{
			"{ns}": diffNS, "{ns2}": diffNS2, "{pc}": diffPriority, "{cr}": diffRole,
			// A resourceVersion older than both servers' windows: the
			// default namespace's, written when the API server first
			// started.
			"{oldRV}": def.ResourceVersion,
		},
		unsettled: map[string]string{},
	}
	// A last configmap gives the configmaps' current resourceVersion;
	// the world is settled once informerd has it.
	w.createConfigMap(t, "z", map[string]string{"tier": "back"})
	w.vars["{worldRV}"] = w.vars["{rv}"]
	w.settle(t)
	return w
}

// expand replaces the placeholders of s with their current values.
func (w *diffWorld) expand(s string) string {
	pairs := make([]string, 0, 2*len(w.vars))
	for k, v := range w.vars {
		pairs = append(pairs, k, v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// wrote records a write of resource: rv is the resourceVersion it left.
// The configmaps' is {rv} (and {futureRV}, far ahead of it), any other
// resource's is {otherRV}.
func (w *diffWorld) wrote(t *testing.T, resource, name, rv string) {
	t.Helper()
	w.last = lastWrite{name: name, rv: rv}
	w.unsettled[resource] = rv
	if resource == "configmaps" {
		w.vars["{rv}"] = rv
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			t.Fatalf("resourceVersion %q: %v", rv, err)
		}
		w.vars["{futureRV}"] = strconv.FormatUint(n+1_000_000, 10)
		return
	}
	w.vars["{otherRV}"] = rv
}

// createConfigMap creates a configmap in diffNS.
func (w *diffWorld) createConfigMap(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	cm, err := w.k.kube.CoreV1().ConfigMaps(diffNS).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.wrote(t, "configmaps", name, cm.ResourceVersion)
}

// deleteConfigMap deletes a configmap of diffNS.
func (w *diffWorld) deleteConfigMap(t *testing.T, name string) {
	t.Helper()
	if err := w.k.kube.CoreV1().ConfigMaps(diffNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.last = lastWrite{name: name, deleted: true}
	w.deleted = append(w.deleted, deletion{"configmaps", diffNS, name})
}

// updateLabels replaces the labels of an object of resource (configmaps,
// pods, namespaces or priorityclasses) with a JSON patch: one write.
func (w *diffWorld) updateLabels(t *testing.T, resource, ns, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	value, err := json.Marshal(labels)
	if err != nil {
		t.Fatal(err)
	}
	data := fmt.Appendf(nil, `[{"op":"add","path":"/metadata/labels","value":%s}]`, value)
	var m metav1.Object
	switch resource {
	case "configmaps":
		m, err = w.k.kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	case "pods":
		m, err = w.k.kube.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	case "namespaces":
		m, err = w.k.kube.CoreV1().Namespaces().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	case "priorityclasses.scheduling.k8s.io":
		m, err = w.k.kube.SchedulingV1().PriorityClasses().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	default:
		t.Fatalf("updateLabels: no client for %s", resource)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.wrote(t, resource, name, m.GetResourceVersion())
}

// churn makes four changes to the configmap name of diffNS, which does
// not exist: create it with app=web, relabel it app=db (it leaves an
// app=web selection), relabel it app=web,tier=front (it comes back),
// delete it.
func (w *diffWorld) churn(name string) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		w.createConfigMap(t, name, map[string]string{"app": "web"})
		w.updateLabels(t, "configmaps", diffNS, name, map[string]string{"app": "db"})
		w.updateLabels(t, "configmaps", diffNS, name, map[string]string{"app": "web", "tier": "front"})
		w.deleteConfigMap(t, name)
	}
}

// relabel returns a hook that sets label churn=<i> on an object, for each
// i up to n: n changes of an object that cannot simply be deleted.
func (w *diffWorld) relabel(resource, ns, name string, n int) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		for i := 1; i <= n; i++ {
			w.updateLabels(t, resource, ns, name, map[string]string{"team": "diff", "churn": strconv.Itoa(i)})
		}
	}
}

// settle waits until informerd's caches hold every write recorded since
// the last settle, so the next case starts from the same objects on both
// servers. A case's own reads never wait for it.
func (w *diffWorld) settle(t *testing.T) {
	t.Helper()
	for resource, rv := range w.unsettled {
		w.k.waitCached(t, resource, rv)
	}
	for _, del := range w.deleted {
		p, ok := w.k.d.Caches().Lookup(del.resource)
		if !ok {
			t.Fatalf("informerd caches no %s", del.resource)
		}
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("informerd's cache to lose %s %s/%s", del.resource, del.ns, del.name), func() bool {
			_, ok := p.Cache().Get(object.KeyOf(del.ns, del.name))
			return !ok
		})
	}
	w.unsettled, w.deleted = map[string]string{}, nil
}

// routes returns how many requests informerd has answered itself (from
// its caches or discovery) and how many it has forwarded to the API
// server, from its metrics.
func (w *diffWorld) routes(t *testing.T) (answered, forwarded int) {
	t.Helper()
	resp, err := http.Get(w.k.d.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		var n *int
		switch {
		case strings.HasPrefix(l, "informerd_kube_api_requests_total{"):
			n = &answered
		case strings.HasPrefix(l, "informerd_kube_api_forwarded_total{"):
			n = &forwarded
		default:
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics: %s: %v", l, err)
		}
		*n += int(v)
	}
	return answered, forwarded
}

// forgetHistory makes every resourceVersion written so far too old for
// both servers: it changes a configmap more times than informerd's
// history holds, compacts etcd, and restarts the API server, whose new
// watch caches start after it. informerd's watches resume or relist by
// themselves; a last write shows when its configmaps are back.
func (w *diffWorld) forgetHistory(t *testing.T) {
	t.Helper()
	w.createConfigMap(t, "filler", nil)
	for i := range diffHistory {
		w.updateLabels(t, "configmaps", diffNS, "filler", map[string]string{"n": strconv.Itoa(i)})
	}
	if _, err := env.CompactEtcd(); err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	w.createConfigMap(t, "after-restart", nil)
}
