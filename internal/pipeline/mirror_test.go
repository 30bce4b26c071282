package pipeline_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/informerd/informerd/internal/pipeline"
)

// TestCacheMirrorsAPIServer runs pods, configmaps and a CRD through the
// pipeline against the real API server: creates, updates (an indexed field
// and a label), deletes; the cache and the emitted change stream must match
// what the API server did, and a CRD installed late must be picked up.
func TestCacheMirrorsAPIServer(t *testing.T) {
	// Registered first, so it runs after the cleanup that stops the Set.
	ignore := append(leakOptions, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(env.Config)
	const ns = "mirror"
	createNamespace(t, client, ns)

	set := start(t, `
resources:
  - resource: pods
    namespace: mirror
    indexes:
      - {name: app, label: app}
      - {name: image, jsonpath: "{.spec.containers[*].image}"}
  - resource: configmaps
    namespace: mirror
    indexes:
      - {name: owner, jsonpath: "{.data.owner}"}
  - resource: widgets.v1.example.com
`, env.Config)
	waitSynced(t, set, "pods", "configmaps")
	widgets := mustPipeline(t, set, "widgets.v1.example.com")
	waitFor(t, "widgets to report NotFound", func() bool { return widgets.Status().Phase == pipeline.NotFound })
	var unsynced []string
	for _, r := range set.Reports() {
		if !r.Cache.Synced {
			unsynced = append(unsynced, r.Configured)
		}
	}
	if !cmp.Equal(unsynced, []string{"widgets.v1.example.com"}) {
		t.Errorf("unsynced resources = %v; want the widgets alone", unsynced)
	}

	if _, err := client.Resource(crdGVR).Create(ctx, widgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, set, "widgets.v1.example.com")
	if got := widgets.Status().Resolved.CanonicalName(); got != "widgets.example.com" {
		t.Errorf("canonical name = %q, want widgets.example.com", got)
	}

	pods, cms := mustPipeline(t, set, "pods"), mustPipeline(t, set, "configmaps")
	recs := map[string]*recorder{}
	for _, p := range []pipeline.Served{pods, cms, widgets} {
		rec := &recorder{}
		defer p.Cache().AddListener(rec)()
		recs[p.Configured()] = rec
	}

	podAPI, cmAPI, wAPI := client.Resource(podsGVR).Namespace(ns), client.Resource(cmGVR).Namespace(ns), client.Resource(widgetsGVR).Namespace(ns)
	must := func(u *unstructured.Unstructured, err error) *unstructured.Unstructured {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	p1 := must(podAPI.Create(ctx, pod(ns, "p1", "a", "web:1", "proxy:1"), metav1.CreateOptions{}))
	must(podAPI.Create(ctx, pod(ns, "p2", "b", "web:1"), metav1.CreateOptions{}))
	p1.SetLabels(map[string]string{"app": "b"})
	must(podAPI.Update(ctx, p1, metav1.UpdateOptions{}))
	if err := podAPI.Delete(ctx, "p2", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}

	c1 := must(cmAPI.Create(ctx, configMap(ns, "c1", map[string]any{"owner": "alice"}), metav1.CreateOptions{}))
	must(cmAPI.Create(ctx, configMap(ns, "c2", map[string]any{"owner": "alice"}), metav1.CreateOptions{}))
	c1.Object["data"] = map[string]any{"owner": "bob"}
	must(cmAPI.Update(ctx, c1, metav1.UpdateOptions{}))
	if err := cmAPI.Delete(ctx, "c2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	w1 := must(wAPI.Create(ctx, widget(ns, "w1", "s"), metav1.CreateOptions{}))
	w1.Object["spec"] = map[string]any{"size": "xl"}
	must(wAPI.Update(ctx, w1, metav1.UpdateOptions{}))
	must(wAPI.Create(ctx, widget(ns, "w2", "m"), metav1.CreateOptions{}))
	if err := wAPI.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	assertMirror(t, client, pods, podsGVR, ns)
	assertMirror(t, client, cms, cmGVR, ns)
	assertMirror(t, client, widgets, widgetsGVR, ns)

	// A pod delete with grace 0 on a pod no kubelet runs is immediate.
	wantEvents := map[string][]string{
		"pods":                   {"ADDED mirror/p1", "ADDED mirror/p2", "MODIFIED mirror/p1", "DELETED mirror/p2"},
		"configmaps":             {"ADDED mirror/c1", "ADDED mirror/c2", "MODIFIED mirror/c1", "DELETED mirror/c2"},
		"widgets.v1.example.com": {"ADDED mirror/w1", "MODIFIED mirror/w1", "ADDED mirror/w2", "DELETED mirror/w1"},
	}
	for name, want := range wantEvents {
		got := recs[name].events()
		// The pod delete may first be a MODIFIED (deletionTimestamp set).
		if name == "pods" {
			got = dropDeletionUpdates(got)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s events (-want +got):\n%s", name, diff)
		}
		rvs := recs[name].rvs
		for i := 1; i < len(rvs); i++ {
			if rvs[i] <= rvs[i-1] {
				t.Errorf("%s event RVs not increasing: %v", name, rvs)
				break
			}
		}
	}

	tests := []struct {
		name   string
		p      pipeline.Served
		index  string
		values []string
		want   []string
	}{
		{"label index follows the label change", pods, "app", []string{"b"}, []string{"mirror/p1"}},
		{"old label value is empty", pods, "app", []string{"a"}, nil},
		{"multi-valued jsonpath index", pods, "image", []string{"proxy:1"}, []string{"mirror/p1"}},
		{"jsonpath index follows the data change", cms, "owner", []string{"bob"}, []string{"mirror/c1"}},
		{"deleted object left its value", cms, "owner", []string{"alice"}, nil},
		{"namespace index", widgets, "namespace", []string{ns}, []string{"mirror/w2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, keysOf(t, tt.p, tt.index, tt.values...)); diff != "" {
				t.Errorf("ByIndex(%s, %v) (-want +got):\n%s", tt.index, tt.values, diff)
			}
		})
	}
}

// dropDeletionUpdates removes a MODIFIED directly before a DELETED of the
// same object: the API server may report the graceful-deletion mark first.
func dropDeletionUpdates(evs []string) []string {
	var out []string
	for i, e := range evs {
		if i+1 < len(evs) && len(e) > 9 && e[:9] == "MODIFIED " && evs[i+1] == "DELETED "+e[9:] {
			continue
		}
		out = append(out, e)
	}
	return out
}
