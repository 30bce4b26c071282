package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
)

// TestRawClientAgainstAPIServer holds informerd's raw list/watch client to
// the dynamic client on a real API server: paginated lists give the same
// objects (items get apiVersion and kind), watches decode every event, and
// the API server's errors keep their status.
func TestRawClientAgainstAPIServer(t *testing.T) {
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	const ns = "rawclient"
	createNamespace(t, dyn, ns)
	for i := range 5 {
		if _, err := dyn.Resource(cmGVR).Namespace(ns).Create(ctx, configMap(ns, fmt.Sprint("cm-", i), map[string]any{"i": fmt.Sprint(i)}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := dyn.Resource(cmGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := reflector.NewClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	lw := client.ListWatch(cmGVR, ns, nil, nil)

	got := map[string]map[string]any{}
	opts := metav1.ListOptions{Limit: 2}
	pages := 0
	for {
		obj, err := lw.ListWithContext(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		l := obj.(*object.RawList)
		pages++
		for _, it := range l.Items {
			var m map[string]any
			if err := json.Unmarshal(it.JSON, &m); err != nil {
				t.Fatal(err)
			}
			got[it.Name] = m
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if pages != 3 {
		t.Errorf("%d pages of 2 for 5 objects, want 3", pages)
	}
	wantByName := map[string]map[string]any{}
	for _, it := range want.Items {
		wantByName[it.GetName()] = it.Object
	}
	if diff := cmp.Diff(wantByName, got); diff != "" {
		t.Errorf("raw list differs from the dynamic client's (-dynamic +raw):\n%s", diff)
	}

	_, err = lw.ListWithContext(ctx, metav1.ListOptions{Limit: 2, Continue: "not-a-token"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("list with a bad continue token: %v, want a BadRequest status", err)
	}

	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: want.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := dyn.Resource(cmGVR).Namespace(ns).Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if r, ok := ev.Object.(*object.Raw); ev.Type != watch.Deleted || !ok || r.Name != "cm-0" || r.Kind != "ConfigMap" {
		t.Errorf("watch event %s %#v, want DELETED cm-0", ev.Type, ev.Object)
	}
}
