package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	cmGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// leakOptions ignore goroutines client-go keeps on purpose: pooled HTTP/2
// connections and klog's flush daemon.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	// envtest waits on the kube-apiserver process a restart started.
	goleak.IgnoreAnyFunction("os.(*Process).Wait"),
}

// recorder is an indexer.Listener collecting "TYPE key" lines and RVs.
type recorder struct {
	mu   sync.Mutex
	evs  []string
	rvs  []uint64
	flag []bool
}

func (r *recorder) OnEvent(ev indexer.Event) {
	if ev.Type == watch.Bookmark {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, string(ev.Type)+" "+ev.Object.Key)
	r.rvs = append(r.rvs, ev.RV)
	r.flag = append(r.flag, ev.Relist)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.evs...)
}

// start runs a Set for yaml against cfg until the test ends.
func start(t *testing.T, yaml string, cfg *rest.Config) *pipeline.Set {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := pipeline.NewSet(c, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, set)
	return set
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, what, cond)
}

func waitSynced(t *testing.T, set *pipeline.Set, names ...string) {
	t.Helper()
	for _, n := range names {
		p, ok := set.Lookup(n)
		if !ok {
			t.Fatalf("no pipeline %q", n)
		}
		waitFor(t, n+" to sync", func() bool { return p.Cache().Stats().Synced })
	}
}

func mustPipeline(t *testing.T, set *pipeline.Set, name string) pipeline.Served {
	t.Helper()
	p, ok := set.Lookup(name)
	if !ok {
		t.Fatalf("no pipeline %q", name)
	}
	return p
}

// apiState lists gvr in ns from the API server as key -> resourceVersion.
func apiState(t *testing.T, client dynamic.Interface, gvr schema.GroupVersionResource, ns string) (map[string]string, string) {
	t.Helper()
	list, err := client.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	return out, list.GetResourceVersion()
}

func cacheState(p pipeline.Served) map[string]string {
	out := map[string]string{}
	for _, o := range p.Cache().List(nil).Objects {
		out[o.Key] = o.ResourceVersion
	}
	return out
}

// assertMirror waits until the cache holds exactly what the API server
// lists, object by object with resourceVersions, and reports the difference
// if it never does. (Waiting for the list's RV instead would wait for a
// bookmark: the list RV is etcd's global revision.)
func assertMirror(t *testing.T, client dynamic.Interface, p pipeline.Served, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	want, _ := apiState(t, client, gvr, ns)
	testenv.Poll(60*time.Second, func() bool { return cmp.Equal(want, cacheState(p)) })
	if diff := cmp.Diff(want, cacheState(p)); diff != "" {
		t.Errorf("%s cache vs API server (-api +cache):\n%s", p.Name(), diff)
	}
}

func createNamespace(t *testing.T, client dynamic.Interface, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if _, err := client.Resource(nsGVR).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func configMap(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     data,
	}}
}

func pod(ns, name, app string, images ...string) *unstructured.Unstructured {
	var containers []any
	for i, img := range images {
		containers = append(containers, map[string]any{"name": fmt.Sprintf("c%d", i), "image": img})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": app}},
		"spec":     map[string]any{"containers": containers},
	}}
}

func widgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

func widget(ns, name, size string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"size": size},
	}}
}

func keysOf(t *testing.T, p pipeline.Served, index string, values ...string) []string {
	t.Helper()
	s, err := p.Cache().ByIndex(index, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range s.Objects {
		out = append(out, o.Key)
	}
	sort.Strings(out)
	return out
}
