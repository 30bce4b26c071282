package inject_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/informerd/informerd/internal/inject"
)

// FuzzHandle feeds arbitrary objects to the webhook: it never denies a
// pod, never panics, and a pod it injects, injected again, is unchanged.
func FuzzHandle(f *testing.F) {
	seed, _ := json.Marshal(pod("a", map[string]string{inject.AnnotationInject: "true"}))
	f.Add(seed, true)
	f.Add([]byte(`{"metadata":{"annotations":{"informerd.io/inject":"maybe"}}}`), false)
	f.Add([]byte(`{"spec":{"initContainers":[{"name":"informerd"}]}}`), true)
	f.Add([]byte(`not json`), true)
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: inject.DefaultConfigMap, Namespace: "ns"}})
	h := inject.NewHandler(inject.DefaultOptions("informerd:fuzz"), kube, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Fuzz(func(t *testing.T, raw []byte, namespaceEnabled bool) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns", Object: runtime.RawExtension{Raw: raw}}}
		resp := h.Handle(context.Background(), req, namespaceEnabled)
		if !resp.Allowed {
			t.Fatalf("a pod was refused: %+v", resp.Result)
		}
		if len(resp.Patches) == 0 {
			return
		}
		var p corev1.Pod
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("patched an object that is not a pod: %v", err)
		}
		if p.Namespace == "" {
			p.Namespace = "ns"
		}
		d := inject.Decide(&p, namespaceEnabled)
		once := inject.Mutate(&p, d.ConfigMap, inject.DefaultOptions("informerd:fuzz"))
		if again := inject.Decide(once, namespaceEnabled); again.Inject {
			t.Fatal("an injected pod would be injected again")
		}
	})
}
