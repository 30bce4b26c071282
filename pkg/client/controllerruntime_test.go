package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
	"github.com/informerd/informerd/pkg/client"
)

// TestControllerRuntimeCache runs a controller-runtime cache whose
// informers come from NewInformerFunc: Get and List read objects that came
// through informerd (no managedFields), and a change reaches the cache.
func TestControllerRuntimeCache(t *testing.T) {
	const ns = "controller-runtime"
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	namespace(t, kube, ns)
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, env.Config, "resources: [{resource: configmaps}]", testserver.Options{})

	c, err := crcache.New(env.Config, crcache.Options{NewInformer: client.NewInformerFunc(dial(t, srv.Addr), client.Options{Namespace: ns})})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Start(cctx); err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The informer starts on the first Get.
	gctx, gcancel := context.WithTimeout(ctx, time.Minute)
	defer gcancel()
	if !c.WaitForCacheSync(gctx) {
		t.Fatal("the cache did not start")
	}
	var cm corev1.ConfigMap
	if err := c.Get(gctx, crclient.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["v"] != "1" || len(cm.ManagedFields) > 0 {
		t.Errorf("cached configmap: data %v, %d managedFields; want v=1 and none (informerd strips them)", cm.Data, len(cm.ManagedFields))
	}
	p, _ := srv.Set().Lookup("configmaps")
	if n := p.Hub().Stats().Watchers; n != 1 {
		t.Errorf("informerd has %d watchers of configmaps, want the cache's one", n)
	}

	cm.Data["v"] = "2"
	if _, err := cms.Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the update to reach the controller-runtime cache", func() bool {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, crclient.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			if item.Name == "settings" && item.Data["v"] == "2" {
				return true
			}
		}
		return false
	})
}
