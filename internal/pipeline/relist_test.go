package pipeline_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/testenv"
)

// TestRelistEmitsOnlyTheDifference cuts informerd off the API server, changes
// objects behind its back, restarts kube-apiserver so the watch cannot resume
// (410) and must relist, and checks the cache emits exactly the differences:
// no missed delete, no event for the unchanged object.
func TestRelistEmitsOnlyTheDifference(t *testing.T) {
	ignore := append(leakOptions, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(env.Config)
	const ns = "relist"
	createNamespace(t, client, ns)
	cmAPI := client.Resource(cmGVR).Namespace(ns)
	for _, name := range []string{"keep", "change", "gone"} {
		if _, err := cmAPI.Create(ctx, configMap(ns, name, map[string]any{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	proxy, err := testenv.NewProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	set := start(t, "resources: [{resource: configmaps, namespace: relist}]", proxy.Config(env.Config))
	waitSynced(t, set, "configmaps")
	cms := mustPipeline(t, set, "configmaps")
	assertMirror(t, client, cms, cmGVR, ns)
	rec := &recorder{}
	defer cms.Cache().AddListener(rec)()

	proxy.Cut()
	change, err := cmAPI.Get(ctx, "change", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change.Object["data"] = map[string]any{"v": "2"}
	if _, err := cmAPI.Update(ctx, change, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cmAPI.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cmAPI.Create(ctx, configMap(ns, "new", map[string]any{"v": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	relistsBefore := cms.(*pipeline.Pipeline).Report().Upstream.Relists.Load()
	proxy.Restore()

	assertMirror(t, client, cms, cmGVR, ns)
	want := []string{"MODIFIED relist/change", "ADDED relist/new", "DELETED relist/gone"}
	if diff := cmp.Diff(want, rec.events()); diff != "" {
		t.Errorf("events after the outage (-want +got):\n%s", diff)
	}
	for i, relist := range rec.flag {
		if !relist {
			t.Errorf("event %d (%s) did not come from a relist", i, rec.evs[i])
		}
	}
	if got := cms.(*pipeline.Pipeline).Report().Upstream.Relists.Load(); got <= relistsBefore {
		t.Errorf("relists = %d, want more than %d: the watch should have had to relist", got, relistsBefore)
	}
	if cms.(*pipeline.Pipeline).Report().Upstream.WatchStarts.Load() < 2 {
		t.Errorf("watch starts = %d, want at least 2", cms.(*pipeline.Pipeline).Report().Upstream.WatchStarts.Load())
	}
}
