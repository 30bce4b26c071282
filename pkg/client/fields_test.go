package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
	"github.com/informerd/informerd/pkg/client"
)

// podFields is the mask of the informers of TestInformerFields: what a
// routing sidecar needs.
var podFields = []string{"metadata.name", "metadata.labels", "status.podIP"}

// projectedPod is a pod as podFields show it.
func projectedPod(p *corev1.Pod) map[string]any {
	m := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name": p.Name, "namespace": p.Namespace, "uid": string(p.UID), "resourceVersion": p.ResourceVersion,
		},
	}
	if len(p.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range p.Labels {
			labels[k] = v
		}
		m["metadata"].(map[string]any)["labels"] = labels
	}
	// Every pod has a status (a phase at least): the mask keeps it, with
	// only the podIP, if any.
	status := map[string]any{}
	if p.Status.PodIP != "" {
		status["podIP"] = p.Status.PodIP
	}
	m["status"] = status
	return m
}

// asStored returns an informer's object as a map: an unstructured one as
// it is; a typed pod as podFields show it, after checking that it holds
// nothing else.
func asStored(t *testing.T, obj any) map[string]any {
	t.Helper()
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.Object
	case *corev1.Pod:
		shown := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion, Labels: o.Labels,
		}, Status: corev1.PodStatus{PodIP: o.Status.PodIP}}
		if diff := cmp.Diff(shown.ObjectMeta, o.ObjectMeta); diff != "" {
			t.Errorf("%s: metadata beyond the mask (-mask +stored):\n%s", o.Name, diff)
		}
		if diff := cmp.Diff(corev1.PodSpec{}, o.Spec); diff != "" {
			t.Errorf("%s: a spec the mask hides (-want +stored):\n%s", o.Name, diff)
		}
		if diff := cmp.Diff(shown.Status, o.Status); diff != "" {
			t.Errorf("%s: status beyond the mask (-mask +stored):\n%s", o.Name, diff)
		}
		return projectedPod(o)
	}
	t.Fatalf("the informer stores a %T", obj)
	return nil
}

// updates records the update handler calls of an informer as "name rv".
type updates struct {
	mu    sync.Mutex
	calls []string
}

func (u *updates) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		a, _ := meta.Accessor(obj)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.calls = append(u.calls, a.GetName()+" "+a.GetResourceVersion())
	}}
}

func (u *updates) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

// TestInformerFields runs client-go's SharedIndexInformer on a ListWatch
// with a field mask: its store holds the pods as the mask shows them, a
// change to hidden fields calls no handler, and one to a shown field
// does. Once typed with a streaming list, once unstructured with list
// then watch.
func TestInformerFields(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	tests := []struct {
		name    string
		example runtime.Object
		opts    client.Options
	}{
		{name: "typed, streaming list", example: &corev1.Pod{}, opts: client.Options{Resource: "pods", Fields: podFields}},
		{name: "unstructured, list then watch", example: u, opts: client.Options{DisableWatchList: true, Fields: podFields}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			ctx := context.Background()
			ns := fmt.Sprintf("fields-%d", i)
			kube := kubernetes.NewForConfigOrDie(env.Config)
			namespace(t, kube, ns)
			pods := kube.CoreV1().Pods(ns)
			for _, name := range []string{"p0", "p1"} {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
				}
				if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			srv := testserver.Start(t, env.Config, fmt.Sprintf("resources: [{resource: pods, namespace: %s}]", ns), testserver.Options{})
			lw, err := client.NewListWatch(dial(t, srv.Addr), tt.example, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			inf := cache.NewSharedIndexInformer(lw, tt.example, 0, cache.Indexers{})
			upd := &updates{}
			if _, err := inf.AddEventHandler(upd.handler()); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { inf.RunWithContext(rctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			sctx, scancel := context.WithTimeout(rctx, time.Minute)
			defer scancel()
			if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync through informerd within a minute")
			}

			// check waits for the store to hold every pod of ns as the
			// mask shows it. A pod whose last change was hidden is stored
			// at the resourceVersion of its last shown change, in shownAt.
			check := func(when string, shownAt map[string]string) {
				t.Helper()
				var want, got map[string]any
				ok := testenv.Poll(time.Minute, func() bool {
					list, err := pods.List(ctx, metav1.ListOptions{})
					if err != nil {
						t.Fatal(err)
					}
					want, got = map[string]any{}, map[string]any{}
					for i := range list.Items {
						p := &list.Items[i]
						if rv, ok := shownAt[p.Name]; ok {
							p.ResourceVersion = rv
						}
						want[p.Name] = projectedPod(p)
					}
					for _, o := range inf.GetStore().List() {
						a, _ := meta.Accessor(o)
						got[a.GetName()] = asStored(t, o)
					}
					return cmp.Equal(want, got)
				})
				if !ok {
					t.Fatalf("%s: the store does not hold the projected pods after a minute (-want +got):\n%s", when, cmp.Diff(want, got))
				}
			}
			check("after sync", nil)

			patch := func(name, p string, subresource ...string) string {
				t.Helper()
				pod, err := pods.Patch(ctx, name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}, subresource...)
				if err != nil {
					t.Fatal(err)
				}
				return pod.ResourceVersion
			}
			// Hidden, shown, hidden, shown: each shown change is one
			// update call, and the hidden ones, which come before each,
			// none.
			patch("p0", `{"metadata":{"annotations":{"note":"y"}}}`)
			ip := patch("p0", `{"status":{"podIP":"10.0.0.7"}}`, "status")
			patch("p0", `{"spec":{"containers":[{"name":"c","image":"img:2"}]}}`)
			label := patch("p1", `{"metadata":{"labels":{"tier":"front"}}}`)
			want := []string{"p0 " + ip, "p1 " + label}
			testenv.Eventually(t, time.Minute, "the update handler to be called for the label change", func() bool {
				return len(upd.list()) >= 2
			})
			if diff := cmp.Diff(want, upd.list()); diff != "" {
				t.Errorf("update handler calls (-want +got):\n%s", diff)
			}
			check("after the changes", map[string]string{"p0": ip})
		})
	}
}

// TestFieldsErrors: a mask informerd refuses fails List and Watch with 400
// BadRequest saying what is wrong.
func TestFieldsErrors(t *testing.T) {
	srv := testserver.Start(t, env.Config, "resources: [{resource: pods}]", testserver.Options{})
	c := dial(t, srv.Addr)
	ctx := context.Background()
	whole, err := client.NewListWatch(c, &corev1.Pod{}, client.Options{Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the pods cache to sync", func() bool {
		_, err := whole.ListWithContext(ctx, metav1.ListOptions{})
		return err == nil
	})
	tests := []struct {
		name   string
		fields []string
		want   string
	}{
		{name: "malformed", fields: []string{"metadata..labels"}, want: "empty field name"},
		{name: "not in the schema", fields: []string{"metadata.name", "status.podIPz"}, want: "did you mean podIP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lw, err := client.NewListWatch(c, &corev1.Pod{}, client.Options{Resource: "pods", Fields: tt.fields})
			if err != nil {
				t.Fatal(err)
			}
			check := func(call string, err error) {
				t.Helper()
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "fields") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s with fields %q: %v, want 400 BadRequest saying %q", call, tt.fields, err, tt.want)
				}
			}
			_, err = lw.ListWithContext(ctx, metav1.ListOptions{})
			check("List", err)
			_, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
			check("Watch", err)
		})
	}
}
