// Package deploy_test renders every kustomization under deploy/ and creates
// the result on the real test API server with server-side dry run, so a
// broken manifest fails `make test`.
package deploy_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// render runs kustomize on one folder under deploy/.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range res.Resources() {
		// Through JSON, so numbers are int64/float64 as unstructured
		// expects, not the ints of kustomize's YAML maps.
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			t.Fatalf("%s: %v", r.CurId(), err)
		}
		objs = append(objs, o)
	}
	return objs
}

func TestManifests(t *testing.T) {
	// deploy/monitoring needs the Prometheus Operator's CRDs.
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{"testdata/crds"}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install the Prometheus Operator CRDs from deploy/testdata/crds: %v", err)
	}
	// The tiered example's leaf config names ${NODE_NAME}, which its
	// DaemonSet sets from the downward API.
	t.Setenv("NODE_NAME", "node-1")
	for _, dir := range []string{"base", "inject", "examples/sidecar", "examples/kube-api-sidecar", "examples/shared-client", "examples/shared-statefulset", "examples/tiered", "monitoring"} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			sawConfig := dryRunAll(t, objs)
			if !sawConfig && dir != "monitoring" && dir != "examples/shared-client" && dir != "inject" { // inject: each injected namespace has its own
				t.Error("no informerd config in the rendered manifests")
			}
		})
	}
}

// dryRunAll creates objs on the test API server with server-side dry run
// and strict field validation (their Namespaces for real: a dry-run object
// in a namespace that does not exist is refused), parses every informerd
// config.yaml among them, and reports whether there was one.
func dryRunAll(t *testing.T, objs []*unstructured.Unstructured) (sawConfig bool) {
	t.Helper()
	client := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	namespaces := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, o := range objs {
		ns := o
		switch {
		case o.GetKind() == "Namespace":
		case o.GetNamespace() != "":
			ns = &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(o.GetNamespace())
		default:
			continue
		}
		if _, err := namespaces.Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns.GetName(), err)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		ri := client.Resource(mapping.Resource).Namespace(o.GetNamespace())
		if _, err := ri.Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Errorf("server-side dry run of %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
		// The shipped informerd config must itself be valid.
		if data, ok, _ := unstructured.NestedString(o.Object, "data", "config.yaml"); gvk.Kind == "ConfigMap" && ok {
			if _, err := config.Parse([]byte(data)); err != nil {
				t.Errorf("config.yaml in %s: %v", o.GetName(), err)
			}
			sawConfig = true
		}
	}
	return sawConfig
}

// TestMonitorsSelect checks that the ServiceMonitor and PodMonitor select
// the Service and sidecar pods the other kustomizations ship, by label and
// by port name: the dry run cannot see a monitor that selects nothing.
func TestMonitorsSelect(t *testing.T) {
	byKind := func(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
		t.Fatalf("no %s rendered", kind)
		return nil
	}
	monitoring := render(t, "monitoring")

	sm := byKind(monitoring, "ServiceMonitor")
	svc := byKind(render(t, "base"), "Service")
	want, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !selects(want, svc.GetLabels()) {
		t.Errorf("ServiceMonitor selects %v; the base Service has labels %v", want, svc.GetLabels())
	}
	var svcPorts []string
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		svcPorts = append(svcPorts, p.(map[string]any)["name"].(string))
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	for _, e := range endpoints {
		if port := e.(map[string]any)["port"].(string); !slices.Contains(svcPorts, port) {
			t.Errorf("ServiceMonitor scrapes port %q; the Service has %v", port, svcPorts)
		}
	}

	pm := byKind(monitoring, "PodMonitor")
	dep := byKind(render(t, "examples/sidecar"), "Deployment")
	want, _, _ = unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	if !selects(want, podLabels) {
		t.Errorf("PodMonitor selects %v; the sidecar example's pods have labels %v", want, podLabels)
	}
	var podPorts []string
	for _, field := range []string{"initContainers", "containers"} {
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", field)
		for _, c := range containers {
			cports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range cports {
				podPorts = append(podPorts, p.(map[string]any)["name"].(string))
			}
		}
	}
	endpoints, _, _ = unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	for _, e := range endpoints {
		if port := e.(map[string]any)["port"].(string); !slices.Contains(podPorts, port) {
			t.Errorf("PodMonitor scrapes port %q; the sidecar pod has %v", port, podPorts)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDashboard checks the Grafana dashboard parses and that every metric
// its queries use is one informerd documents.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/informerd-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`informerd_[a-z_]+`)
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		titles[p.Title] = true
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(m, "_bucket")
				if !strings.Contains(string(doc), "`"+base+"`") {
					t.Errorf("panel %q uses %s, which docs/metrics.md does not document", p.Title, m)
				}
			}
		}
	}
	for _, want := range []string{"Upstream lag", "Fan-out lag", "Watchers", "Ended streams"} {
		found := false
		for title := range titles {
			found = found || strings.HasPrefix(title, want)
		}
		if !found {
			t.Errorf("no panel titled %q…", want)
		}
	}
}

// TestKubeAPISidecar checks what the dry run cannot see in
// deploy/examples/kube-api-sidecar: informerd accepts its flags with its
// config, and the app's kubeconfig points at the address and certificate
// informerd serves the Kubernetes API with, using the pod's token.
func TestKubeAPISidecar(t *testing.T) {
	var dep, cfg, kc *unstructured.Unstructured
	for _, o := range render(t, "examples/kube-api-sidecar") {
		switch {
		case o.GetKind() == "Deployment":
			dep = o
		case strings.HasPrefix(o.GetName(), "informerd-sidecar-config-"):
			cfg = o
		case strings.HasPrefix(o.GetName(), "informerd-kubeconfig-"):
			kc = o
		}
	}
	if dep == nil || cfg == nil || kc == nil {
		t.Fatal("want a Deployment, the informerd config and the kubeconfig")
	}
	var pod corev1.PodSpec
	spec, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("want informerd as the one init container and the app, got %d and %d", len(pod.InitContainers), len(pod.Containers))
	}
	informerd, app := pod.InitContainers[0], pod.Containers[0]

	o := parseArgs(t, informerd.Args)
	data, _, _ := unstructured.NestedString(cfg.Object, "data", "config.yaml")
	c, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	o.Config = c
	if err := o.Validate(); err != nil {
		t.Errorf("informerd refuses its args: %v", err)
	}

	data, _, _ = unstructured.NestedString(kc.Object, "data", "kubeconfig")
	kubeconfig, err := clientcmd.Load([]byte(data))
	if err != nil {
		t.Fatalf("the app's kubeconfig: %v", err)
	}
	kctx := kubeconfig.Contexts[kubeconfig.CurrentContext]
	if kctx == nil || kubeconfig.Clusters[kctx.Cluster] == nil || kubeconfig.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("the app's kubeconfig has no complete current context: %+v", kctx)
	}
	cluster, user := kubeconfig.Clusters[kctx.Cluster], kubeconfig.AuthInfos[kctx.AuthInfo]
	// https: client-go sends the token only to an https server.
	if want := "https://" + o.KubeAPIAddress; cluster.Server != want {
		t.Errorf("the app's kubeconfig points at %s; informerd serves the Kubernetes API at %s", cluster.Server, want)
	}
	if user.TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("the app's kubeconfig reads its token from %q, not the pod's ServiceAccount token", user.TokenFile)
	}
	// The CA file comes from the Secret of informerd's certificate.
	secretOf := func(c corev1.Container, file string) string {
		for _, m := range c.VolumeMounts {
			if rel, ok := strings.CutPrefix(file, m.MountPath+"/"); ok {
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.Secret != nil {
						return v.Secret.SecretName + "/" + rel
					}
				}
			}
		}
		return ""
	}
	certSecret := secretOf(informerd, o.TLS.CertFile)
	caSecret := secretOf(app, cluster.CertificateAuthority)
	if certSecret == "" || caSecret == "" || path.Dir(certSecret) != path.Dir(caSecret) {
		t.Errorf("informerd's certificate comes from %q and the app's CA from %q: want one Secret", certSecret, caSecret)
	}
	if env := app.Env; len(env) == 0 || env[0].Name != "KUBECONFIG" || secretOf(app, env[0].Value) != "" {
		t.Errorf("the app's KUBECONFIG: %+v", env)
	}
}

// TestStateDir checks what the dry run cannot see of --state-dir: where a
// kustomization sets it, informerd accepts its flags with its config and
// the directory is a writable mount of a volume of the pod's own — an
// emptyDir with a sizeLimit for a sidecar (it survives container
// restarts), a claim of the StatefulSet's volumeClaimTemplates for shared
// mode (one ReadWriteOnce claim per replica: two informerd processes must
// never share a state directory). The base keeps no state, and the
// StatefulSet's pod template is the base Deployment's plus the state.
func TestStateDir(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		kind string // the workload's kind
		want string // "" (no state), "emptyDir" or "claim"
	}{
		{"base", "Deployment", ""},
		{"examples/sidecar", "Deployment", "emptyDir"},
		{"examples/kube-api-sidecar", "Deployment", "emptyDir"},
		{"examples/shared-statefulset", "StatefulSet", "claim"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			objs := render(t, tc.dir)
			var workload *unstructured.Unstructured
			var cfg *config.Config
			for _, o := range objs {
				if o.GetKind() == "Deployment" || o.GetKind() == "StatefulSet" {
					if workload != nil || o.GetKind() != tc.kind {
						t.Fatalf("want one %s and no other workload, got %s %s", tc.kind, o.GetKind(), o.GetName())
					}
					workload = o
				}
				if data, ok, _ := unstructured.NestedString(o.Object, "data", "config.yaml"); o.GetKind() == "ConfigMap" && ok {
					c, err := config.Parse([]byte(data))
					if err != nil {
						t.Fatal(err)
					}
					cfg = c
				}
			}
			if workload == nil || cfg == nil {
				t.Fatalf("want a %s and the informerd config", tc.kind)
			}
			var tmpl corev1.PodTemplateSpec
			var claims []corev1.PersistentVolumeClaim
			switch tc.kind {
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(workload.Object, &d); err != nil {
					t.Fatal(err)
				}
				tmpl = d.Spec.Template
			case "StatefulSet":
				var s appsv1.StatefulSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(workload.Object, &s); err != nil {
					t.Fatal(err)
				}
				tmpl, claims = s.Spec.Template, s.Spec.VolumeClaimTemplates
				checkLikeBase(t, s)
			}
			pod := tmpl.Spec
			informerd, ok := informerdContainer(pod)
			if !ok {
				t.Fatal("no informerd container")
			}
			o := parseArgs(t, informerd.Args)
			o.Config = cfg
			if err := o.Validate(); err != nil {
				t.Errorf("informerd refuses its args: %v", err)
			}
			if tc.want == "" {
				if o.StateDir != "" {
					t.Errorf("--state-dir=%s: want no state here", o.StateDir)
				}
				return
			}
			if o.StateDir == "" {
				t.Fatal("no --state-dir")
			}
			var mount *corev1.VolumeMount
			for i, m := range informerd.VolumeMounts {
				if o.StateDir == m.MountPath || strings.HasPrefix(o.StateDir, strings.TrimSuffix(m.MountPath, "/")+"/") {
					mount = &informerd.VolumeMounts[i]
				}
			}
			if mount == nil {
				t.Fatalf("--state-dir=%s is on no volume: the root filesystem is read-only", o.StateDir)
			}
			if mount.ReadOnly {
				t.Errorf("volume %s is mounted read-only at %s", mount.Name, mount.MountPath)
			}
			var volume *corev1.Volume
			for i, v := range pod.Volumes {
				if v.Name == mount.Name {
					volume = &pod.Volumes[i]
				}
			}
			var claim *corev1.PersistentVolumeClaim
			for i, c := range claims {
				if c.Name == mount.Name {
					claim = &claims[i]
				}
			}
			switch tc.want {
			case "emptyDir":
				switch {
				case volume == nil || volume.EmptyDir == nil:
					t.Errorf("--state-dir is on volume %s, want an emptyDir", mount.Name)
				case volume.EmptyDir.Medium == corev1.StorageMediumMemory:
					t.Errorf("emptyDir %s is in memory: the state would count against the pod's memory", mount.Name)
				case volume.EmptyDir.SizeLimit == nil || volume.EmptyDir.SizeLimit.IsZero():
					t.Errorf("emptyDir %s has no sizeLimit", mount.Name)
				}
			case "claim":
				if volume != nil || claim == nil {
					t.Fatalf("--state-dir is on volume %s, want a claim of volumeClaimTemplates (one per replica)", mount.Name)
				}
				if !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) &&
					!slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}) {
					t.Errorf("claim %s has access modes %v, want ReadWriteOnce or ReadWriteOncePod: one replica's own", claim.Name, claim.Spec.AccessModes)
				}
				if size := claim.Spec.Resources.Requests[corev1.ResourceStorage]; size.IsZero() {
					t.Errorf("claim %s requests no storage", claim.Name)
				}
				// A new volume's root belongs to root; informerd runs as
				// a user that can write it only through fsGroup.
				if sc := pod.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsGroup == nil || *sc.FSGroup != *sc.RunAsGroup {
					t.Errorf("the pod's fsGroup must be informerd's group, so that it may write the claim: %+v", sc)
				}
			}
		})
	}
}

// checkLikeBase checks that shared-statefulset's StatefulSet is the base
// Deployment, its pod template taken over as it is but for the state, and
// that the base Service selects its pods.
func checkLikeBase(t *testing.T, s appsv1.StatefulSet) {
	t.Helper()
	var dep appsv1.Deployment
	var svc corev1.Service
	for _, o := range render(t, "base") {
		switch o.GetKind() {
		case "Deployment":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
		case "Service":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &svc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Name != dep.Name || !equality.Semantic.DeepEqual(s.Spec.Replicas, dep.Spec.Replicas) || !equality.Semantic.DeepEqual(s.Spec.Selector, dep.Spec.Selector) {
		t.Errorf("StatefulSet %s (replicas %v, selector %v) is not the base's Deployment %s (replicas %v, selector %v)",
			s.Name, s.Spec.Replicas, s.Spec.Selector, dep.Name, dep.Spec.Replicas, dep.Spec.Selector)
	}
	if !selects(svc.Spec.Selector, s.Spec.Template.Labels) {
		t.Errorf("the Service selects %v; the StatefulSet's pods have labels %v", svc.Spec.Selector, s.Spec.Template.Labels)
	}
	// The pod template without the state: its flag, its mount, and the
	// fsGroup that lets informerd write the claim.
	got := s.Spec.Template.DeepCopy()
	if sc := got.Spec.SecurityContext; sc != nil {
		sc.FSGroup, sc.FSGroupChangePolicy = nil, nil
	}
	for i := range got.Spec.Containers {
		c := &got.Spec.Containers[i]
		if c.Name != "informerd" {
			continue
		}
		c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--state-") })
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return slices.ContainsFunc(s.Spec.VolumeClaimTemplates, func(pvc corev1.PersistentVolumeClaim) bool { return pvc.Name == m.Name })
		})
	}
	if !equality.Semantic.DeepEqual(*got, dep.Spec.Template) {
		t.Errorf("the StatefulSet's pod template, but for the state, is not the base Deployment's: update deploy/examples/shared-statefulset/statefulset.yaml with deploy/base/deployment.yaml (-StatefulSet +Deployment):\n%s", diff.Diff(*got, dep.Spec.Template))
	}
}

// parseArgs parses a container's args as informerd's flags.
func parseArgs(t *testing.T, args []string) daemon.Options {
	t.Helper()
	o := daemon.NewOptions()
	fs := flag.NewFlagSet("informerd", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("informerd's args: %v", err)
	}
	return o
}

// informerdContainer returns the container named informerd, a native
// sidecar (an init container) or a plain one.
func informerdContainer(pod corev1.PodSpec) (corev1.Container, bool) {
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		if c.Name == "informerd" {
			return c, true
		}
	}
	return corev1.Container{}, false
}
