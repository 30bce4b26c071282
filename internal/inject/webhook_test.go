package inject_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/informerd/informerd/internal/inject"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// warnings collects the warnings the API server relays from webhooks.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func pod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "443"}, {Name: "KEEP", Value: "1"}}}}},
	}
}

func injected(p *corev1.Pod) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == inject.ContainerName {
			return true
		}
	}
	return false
}

// TestWebhook registers the webhook with the real API server (over TLS,
// failurePolicy Ignore, scoped to this test's namespaces) and creates
// Pods: a labelled namespace's Pod is stored with the sidecar, the
// environment and the volumes; an annotated Pod elsewhere too; an opted-out
// Pod, a malformed annotation and a missing ConfigMap are stored unchanged,
// the last two with a warning and an Event; an injected Pod is not injected
// again; with the webhook down, Pods are still admitted.
func TestWebhook(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ca := testenv.NewCA(t, "webhook-ca")
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1", true)
	cert, err := tlsPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := inject.DefaultOptions("informerd:test")
	h := inject.NewHandler(o, kube, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := &http.Server{Handler: h.Mux(), TLSConfig: cert, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	defer srv.Close()
	base := "https://" + lis.Addr().String()

	const scope = "informerd-inject-test"
	webhook := func(name, path string, sel *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: ca.PEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       sel,
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "informerd-inject-test"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			webhook("namespace.inject.informerd.io", inject.PathNamespace, &metav1.LabelSelector{MatchLabels: map[string]string{inject.LabelNamespace: "enabled", scope: "true"}}),
			webhook("pod.inject.informerd.io", inject.PathPod, &metav1.LabelSelector{
				MatchLabels:      map[string]string{scope: "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inject.LabelNamespace, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"enabled"}}},
			}),
		},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mwc.Name, metav1.DeleteOptions{})

	mkns := func(name string, labelled bool) {
		labels := map[string]string{scope: "true"}
		if labelled {
			labels[inject.LabelNamespace] = "enabled"
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkns("inject-on", true)
	mkns("inject-off", false)
	mkns("inject-noconfig", true)
	for _, ns := range []string{"inject-on", "inject-off"} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: inject.DefaultConfigMap}, Data: map[string]string{"config.yaml": "resources: [{resource: configmaps}]"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	warn := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = nil
	cfg.WarningHandler = warn
	client := kubernetes.NewForConfigOrDie(cfg)

	create := func(t *testing.T, ns string, p *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s/%s: %v", ns, p.Name, err)
		}
		return got
	}
	// The webhook may take a moment to be called after its registration.
	testenv.Eventually(t, 30*time.Second, "the API server to call the webhook", func() bool {
		p := create(t, "inject-on", pod("probe-"+time.Now().Format("150405.000000"), nil))
		return injected(p)
	})
	warn.take()

	t.Run("a labelled namespace's pod is injected", func(t *testing.T) {
		p := create(t, "inject-on", pod("a", nil))
		if !injected(p) {
			t.Fatalf("not injected: %+v", p.Spec)
		}
		side := p.Spec.InitContainers[0]
		if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways || side.StartupProbe == nil || side.Image != "informerd:test" {
			t.Errorf("the sidecar is not a native sidecar with a startup probe: %+v", side)
		}
		app := p.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range app.Env {
			env[e.Name] = e.Value
		}
		if env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["KUBERNETES_SERVICE_PORT"] != "16443" || env["KEEP"] != "1" {
			t.Errorf("the app's environment: %v", env)
		}
		var mounts []string
		for _, m := range app.VolumeMounts {
			mounts = append(mounts, m.MountPath+"="+m.Name+":"+m.SubPath)
		}
		want := "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt=informerd-shared:ca.crt"
		if !strings.Contains(strings.Join(mounts, " "), want) {
			t.Errorf("the app's mounts %v lack %s", mounts, want)
		}
		if w := warn.take(); len(w) != 0 {
			t.Errorf("warnings for an injected pod: %v", w)
		}
	})
	t.Run("an opted-out pod is unchanged", func(t *testing.T) {
		if p := create(t, "inject-on", pod("b", map[string]string{inject.AnnotationInject: "false"})); injected(p) || len(p.Spec.Containers[0].Env) != 2 {
			t.Fatalf("an opted-out pod was changed: %+v", p.Spec)
		}
	})
	t.Run("an annotated pod of another namespace is injected", func(t *testing.T) {
		if p := create(t, "inject-off", pod("c", map[string]string{inject.AnnotationInject: "true"})); !injected(p) {
			t.Fatal("not injected")
		}
		if p := create(t, "inject-off", pod("d", nil)); injected(p) {
			t.Fatal("a pod that did not ask was injected")
		}
	})
	for _, c := range []struct{ name, ns, pod, annotation, warning string }{
		{"a malformed annotation", "inject-off", "e", "maybe", `is not true or false`},
		{"a missing ConfigMap", "inject-noconfig", "f", "", "does not exist"},
	} {
		t.Run(c.name+" leaves the pod alone, with a warning and an Event", func(t *testing.T) {
			var ann map[string]string
			if c.annotation != "" {
				ann = map[string]string{inject.AnnotationInject: c.annotation}
			}
			if p := create(t, c.ns, pod(c.pod, ann)); injected(p) {
				t.Fatal("injected")
			}
			if w := warn.take(); len(w) != 1 || !strings.Contains(w[0], c.warning) {
				t.Errorf("warnings %q, want one saying %q", w, c.warning)
			}
			testenv.Eventually(t, 10*time.Second, "the Event", func() bool {
				evs, err := kube.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=InformerdNotInjected,involvedObject.name=" + c.pod})
				return err == nil && len(evs.Items) == 1 && strings.Contains(evs.Items[0].Message, c.warning)
			})
		})
	}
	t.Run("an injected pod is not injected again", func(t *testing.T) {
		p, err := kube.CoreV1().Pods("inject-on").Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "inject-on", Object: runtime.RawExtension{Raw: raw}}}, true)
		if !resp.Allowed || len(resp.Patches) != 0 {
			t.Fatalf("a second pass: allowed %v, %d patches", resp.Allowed, len(resp.Patches))
		}
	})
	t.Run("with the webhook down, pods are admitted", func(t *testing.T) {
		_ = srv.Close()
		if p := create(t, "inject-on", pod("g", nil)); injected(p) {
			t.Fatal("injected with the webhook down?")
		}
	})
}

func tlsPair(certPEM, keyPEM []byte) (*tls.Config, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}, nil
}

// TestSelfSigned makes the webhook's certificate without cert-manager: two
// replicas share one CA through the Secret, each serves a certificate for
// the Service's names signed by it, and the MutatingWebhookConfiguration's
// caBundle is set to it (and set again when someone clears it).
func TestSelfSigned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "inject-selfsigned"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	issuer1, ca1, err := inject.SelfSigned(ctx, kube, ns, "ca", "informerd-inject", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, ca2, err := inject.SelfSigned(ctx, kube, ns, "ca", "informerd-inject", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, ca2) {
		t.Fatal("two replicas made two CAs")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca1)
	pair, err := tls.LoadX509KeyPair(issuer1.CertFile(), issuer1.KeyFile())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "informerd-inject." + ns + ".svc"}); err != nil {
		t.Fatalf("the serving certificate for the Service: %v", err)
	}

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "informerd-inject-selfsigned"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pod.inject.informerd.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "informerd-inject", Path: ptr.To(inject.PathPod)}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	go func() { _ = inject.KeepCABundle(ctx, kube, mwc.Name, ca1, 100*time.Millisecond) }()
	bundle := func() []byte {
		c, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Webhooks[0].ClientConfig.CABundle
	}
	testenv.Eventually(t, 10*time.Second, "the caBundle to be the shared CA", func() bool { return bytes.Equal(bundle(), ca1) })
	c, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the caBundle to be set again after a re-apply cleared it", func() bool { return bytes.Equal(bundle(), ca1) })
}
