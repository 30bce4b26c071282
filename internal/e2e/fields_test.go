package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
)

// sidecarFields is the field mask of runProjected: what a routing sidecar
// needs of a pod.
const sidecarFields = "metadata.name,metadata.labels,status.podIP"

// asSidecarSees returns pod as sidecarFields show it: the identity fields
// apiVersion, kind, metadata's name, namespace, uid and resourceVersion,
// which are always kept, the labels, and the status with only the podIP.
func asSidecarSees(pod *corev1.Pod) map[string]any {
	labels := map[string]any{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	status := map[string]any{}
	if pod.Status.PodIP != "" {
		status["podIP"] = pod.Status.PodIP
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name": pod.Name, "namespace": pod.Namespace, "uid": string(pod.UID), "resourceVersion": pod.ResourceVersion,
			"labels": labels,
		},
		"status": status,
	}
}

// runProjected runs an example client with the field mask sidecarFields
// against a real informerd serving the pods of ns, which holds p0 and p1
// (labelled app=web). Once the client has printed its get step it is about
// to watch; the test then changes the pods, hidden and shown changes in
// turn: p0's annotation, p0's podIP, p0's image, p1's labels. The client
// drops its stream after the first event and resumes. It must list p0 and
// p1, get p0 as the mask shows it (no spec), and receive exactly the two
// shown changes, in order, each object as the mask shows it.
func runProjected(t *testing.T, ns string, cmdFor command) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := kube.CoreV1().Pods(ns)
	created := map[string]*corev1.Pod{}
	for _, name := range []string{"p0", "p1"} {
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created[name] = p
	}
	srv := testserver.Start(t, env.Config, fmt.Sprintf("resources: [{resource: pods, namespace: %s}]", ns), testserver.Options{})
	p, _ := srv.Set().Lookup("pods")
	testenv.Eventually(t, time.Minute, "the cache to hold the two pods", func() bool {
		return p.Cache().Stats().Objects == 2
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	cmd := cmdFor(wctx, srv.Addr, "pods", ns, 2, nil, sidecarFields)
	cmd.Env = append(cmd.Environ(), "RESUME_AFTER=1")
	patch := func(name, p string, subresource ...string) *corev1.Pod {
		t.Helper()
		pod, err := pods.Patch(ctx, name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}, subresource...)
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	var want []line
	got := runClient(t, cmd, func() {
		patch("p0", `{"metadata":{"annotations":{"note":"y"}}}`)
		ip := patch("p0", `{"status":{"podIP":"10.0.0.7"}}`, "status")
		patch("p0", `{"spec":{"containers":[{"name":"c","image":"img:2"}]}}`)
		label := patch("p1", `{"metadata":{"labels":{"tier":"front"}}}`)
		for _, pod := range []*corev1.Pod{ip, label} {
			want = append(want, line{Step: "event", Type: "MODIFIED", Name: pod.Name, Kind: "Pod", ResourceVersion: pod.ResourceVersion, Object: asSidecarSees(pod)})
		}
	})
	if len(got) < 2 || got[0].Step != "list" || !cmp.Equal(got[0].Names, []string{"p0", "p1"}) || got[1].Step != "get" {
		t.Fatalf("list/get lines = %+v", got)
	}
	if diff := cmp.Diff(line{Step: "get", Name: "p0", Kind: "Pod", Object: asSidecarSees(created["p0"])}, got[1]); diff != "" {
		t.Errorf("get with fields %s (-want +got):\n%s", sidecarFields, diff)
	}
	if diff := cmp.Diff(want, watched(t, got[2:])); diff != "" {
		t.Errorf("events the client received with fields %s (-want +got); the annotation and image changes are hidden:\n%s", sidecarFields, diff)
	}
}
