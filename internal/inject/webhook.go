package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Webhook paths: the MutatingWebhookConfiguration sends Pods of labelled
// namespaces to PathNamespace and every other Pod to PathPod (selectors
// cannot match annotations), so the handler knows a Pod's namespace label
// without reading the Namespace.
const (
	PathNamespace = "/inject/namespace"
	PathPod       = "/inject/pod"
)

// Handler decides and mutates Pods; its methods are safe for concurrent
// use.
type Handler struct {
	opts Options
	kube kubernetes.Interface
	log  *slog.Logger
}

// NewHandler builds a Handler that reads ConfigMaps and writes Events with
// kube.
func NewHandler(o Options, kube kubernetes.Interface, log *slog.Logger) *Handler {
	return &Handler{opts: o, kube: kube, log: log}
}

// Mux serves both paths.
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(PathNamespace, &admission.Webhook{Handler: h.handler(true)})
	mux.Handle(PathPod, &admission.Webhook{Handler: h.handler(false)})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

func (h *Handler) handler(namespaceEnabled bool) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return h.Handle(ctx, req, namespaceEnabled)
	})
}

// Handle answers one admission request for a Pod. It never denies.
func (h *Handler) Handle(ctx context.Context, req admission.Request, namespaceEnabled bool) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("informerd: the pod could not be read (%v); it is not injected", err))
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	d := Decide(&pod, namespaceEnabled)
	if d.Inject {
		if err := h.configExists(ctx, pod.Namespace, d.ConfigMap); err != nil {
			d = Decision{Reason: err.Error()}
		}
	}
	if !d.Inject {
		if d.Reason == "" {
			return admission.Allowed("")
		}
		if req.DryRun == nil || !*req.DryRun {
			// sideEffects NoneOnDryRun: a dry run records nothing.
			h.event(ctx, &pod, d.Reason)
		}
		return admission.Allowed("").WithWarnings("informerd: " + d.Reason)
	}
	mutated, err := json.Marshal(Mutate(&pod, d.ConfigMap, h.opts))
	if err != nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("informerd: %v; the pod is not injected", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// configExists checks the ConfigMap the sidecar would mount: without it
// the sidecar could not start, and with the app waiting on it, neither
// could the pod.
func (h *Handler) configExists(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := h.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("ConfigMap %s/%s, informerd's configuration, does not exist; the pod is not injected (create it, or name another with the %s annotation)", ns, name, AnnotationConfig)
	case err != nil:
		return fmt.Errorf("ConfigMap %s/%s, informerd's configuration, could not be read (%v); the pod is not injected", ns, name, err)
	}
	return nil
}

// event records why a Pod was not injected. The Pod may not exist yet
// (its name may still be generated): the Event names what is known.
func (h *Handler) event(ctx context.Context, pod *corev1.Pod, reason string) {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: "informerd-inject-", Namespace: pod.Namespace},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: name},
		Reason:              "InformerdNotInjected",
		Message:             reason,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "informerd-inject"},
		ReportingController: "informerd.io/inject",
		ReportingInstance:   "informerd-inject",
		Action:              "Inject",
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := h.kube.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		h.log.Warn("could not record why a pod was not injected", "namespace", pod.Namespace, "pod", name, "reason", reason, "err", err)
	}
}
