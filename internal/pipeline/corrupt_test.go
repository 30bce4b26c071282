package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/pipeline"
)

// TestIntegrityCheckRepairsACorruptedObject corrupts one cached object
// through a test hook, silently (no event, no new resourceVersion), as a
// bug in informerd would: the cache says checked/b is at an older
// resourceVersion than the API server's. The next check must name that
// object alone, its relist must send watchers exactly that object's real
// state, and the check after must match.
func TestIntegrityCheckRepairsACorruptedObject(t *testing.T) {
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(env.Config)
	const ns = "corrupted"
	createNamespace(t, client, ns)
	cmAPI := client.Resource(cmGVR).Namespace(ns)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := cmAPI.Create(ctx, configMap(ns, name, map[string]any{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Parse([]byte("resources: [{resource: configmaps, namespace: corrupted}]"))
	if err != nil {
		t.Fatal(err)
	}
	cms := checkedConfigMaps(t, c, env.Config, client, ns)
	if r := checkUntilCompared(t, cms); r.Result != pipeline.CheckMatch || r.Objects != 3 {
		t.Fatalf("check of a faithful cache = %+v, want a match of 3 objects", r)
	}

	o, ok := cms.Cache().Get(ns + "/b")
	if !ok {
		t.Fatal("the cache has no corrupted/b")
	}
	bad := *o
	bad.ResourceVersion, bad.RV = "1", 1
	rec := &recorder{}
	defer cms.Cache().AddListener(rec)()
	cms.Cache().Corrupt(&bad)
	if got, _ := cms.Cache().Get(ns + "/b"); got.ResourceVersion != "1" {
		t.Fatal("the test hook did not corrupt the cache: the test proves nothing")
	}

	r := cms.CheckConsistency(ctx)
	if r.Result != pipeline.CheckMismatch || r.Differences != 1 || len(r.Diff) != 1 || !strings.HasPrefix(r.Diff[0], ns+"/b ") {
		t.Fatalf("check after the corruption = %+v, want a mismatch naming %s/b alone", r, ns)
	}
	assertMirror(t, client, cms, cmGVR, ns)
	if diff := cmp.Diff([]string{"MODIFIED " + ns + "/b"}, rec.events()); diff != "" {
		t.Errorf("events the relist brought watchers (-want +got):\n%s", diff)
	}
	if r := checkUntilCompared(t, cms); r.Result != pipeline.CheckMatch || r.Objects != 3 {
		t.Fatalf("check after the relist = %+v, want a match of 3 objects", r)
	}
}
