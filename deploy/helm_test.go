package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const chart = "helm/informerd"

// helmBin is helm v4, built by `make test` from tools/helm (a tool kept
// out of informerd's go.mod).
func helmBin(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../bin/tools/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make $PWD/bin/tools/helm` (make test builds it)", bin)
	}
	return bin
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(strings.TrimSpace(stderr.String()) + ": " + err.Error())
	}
	return string(out), nil
}

// everything turns on every part of the chart.
var everything = []string{"--set", "injector.enabled=true", "--set", "nodeTier.enabled=true", "--set", "monitoring.enabled=true",
	"--set", "grafana.dashboard=true", "--set", "shared.persistence.enabled=true", "--set", "shared.kubeAPIPort=6443",
	"--set", "injector.certManagerCertificate=informerd/informerd-inject"}

// helmTemplate renders the chart as release "informerd" in namespace
// informerd, as deploy/base names things.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", "informerd", chart, "--namespace", "informerd"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("helm template's output: %v", err)
		}
		if len(raw) == 0 {
			continue
		}
		// Through JSON, so numbers are int64 as unstructured expects.
		data, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		// Helm puts a release's namespaced objects in its namespace.
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "Namespace":
		default:
			if o.GetNamespace() == "" {
				o.SetNamespace("informerd")
			}
		}
		objs = append(objs, o)
	}
	return objs
}

// TestHelmChart lints the chart (strict, with its values schema), renders
// it with its defaults and with every part on, creates every rendered
// object on the API server with server-side dry run, checks that its
// defaults are deploy/base's, and that the schema refuses bad values.
func TestHelmChart(t *testing.T) {
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{"testdata/crds"}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	certManager := append(append([]string{}, everything...), "--set", "injector.selfSigned=false")
	for name, args := range map[string][]string{"defaults": nil, "everything": everything, "the injector with cert-manager": certManager} {
		t.Run("lint "+name, func(t *testing.T) {
			if out, err := helm(t, append([]string{"lint", "--strict", chart}, args...)...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
		t.Run("dry run "+name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "node-1")
			objs := helmTemplate(t, args...)
			if !dryRunAll(t, objs) {
				t.Error("no informerd config in the rendered chart")
			}
		})
	}

	t.Run("defaults are deploy/base's", func(t *testing.T) {
		find := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
			for _, o := range objs {
				if o.GetKind() == kind && o.GetName() == name {
					return o
				}
			}
			t.Fatalf("no %s %s", kind, name)
			return nil
		}
		chartObjs, baseObjs := helmTemplate(t), render(t, "base")
		container := func(o *unstructured.Unstructured) map[string]any {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := cs[0].(map[string]any)
			delete(c, "imagePullPolicy")
			return c
		}
		if diff := cmp.Diff(container(find(baseObjs, "Deployment", "informerd")), container(find(chartObjs, "Deployment", "informerd"))); diff != "" {
			t.Errorf("the chart's informerd container differs from deploy/base's (-base +chart):\n%s", diff)
		}
		rules := func(o *unstructured.Unstructured) any { return o.Object["rules"] }
		if diff := cmp.Diff(rules(find(baseObjs, "ClusterRole", "informerd-reader")), rules(find(chartObjs, "ClusterRole", "informerd-reader"))); diff != "" {
			t.Errorf("the chart's ClusterRole differs from deploy/base's (-base +chart):\n%s", diff)
		}
		configOf := func(o *unstructured.Unstructured) map[string]any {
			data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			var m map[string]any
			if err := yaml.Unmarshal([]byte(data), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		var baseConfig *unstructured.Unstructured
		for _, o := range baseObjs {
			if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "informerd-config") {
				baseConfig = o
			}
		}
		if diff := cmp.Diff(configOf(baseConfig), configOf(find(chartObjs, "ConfigMap", "informerd-config"))); diff != "" {
			t.Errorf("the chart's config.yaml differs from deploy/base's (-base +chart):\n%s", diff)
		}
	})

	t.Run("the dashboard is deploy/grafana's", func(t *testing.T) {
		want, err := os.ReadFile("grafana/informerd-dashboard.json")
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(chart + "/dashboards/informerd.json")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Error("deploy/helm/informerd/dashboards/informerd.json differs from deploy/grafana/informerd-dashboard.json: copy it")
		}
	})

	for _, bad := range [][]string{
		{"--set", "shared.authMode=bogus"},
		{"--set", "injector.failurePolicy=Sometimes"},
		{"--set", "shared.extraArgs[0]=no-dashes"},
		{"--set", "unknown=1"},
	} {
		t.Run("the schema refuses "+strings.Join(bad, " "), func(t *testing.T) {
			if _, err := helm(t, append([]string{"template", "informerd", chart}, bad...)...); err == nil {
				t.Fatal("rendered")
			}
		})
	}
}
