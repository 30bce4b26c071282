// Package deploy_test renders every kustomization under deploy/ and creates
// the result on the real test API server with server-side dry run, so a
// broken manifest fails `make test`.
package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func TestManifests(t *testing.T) {
	for _, dir := range []string{"base", "examples/sidecar"} {
		t.Run(dir, func(t *testing.T) {
			res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatalf("kustomize build %s: %v", dir, err)
			}
			client := dynamic.NewForConfigOrDie(env.Config)
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
			var objs []*unstructured.Unstructured
			for _, r := range res.Resources() {
				m, err := r.Map()
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
			// Namespaces are created for real: a dry-run object in a
			// namespace that does not exist is refused.
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					if _, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
						t.Fatalf("create namespace %s: %v", o.GetName(), err)
					}
				}
			}
			sawConfig := false
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
				if gvk.Kind == "ConfigMap" {
					data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
					if _, err := config.Parse([]byte(data)); err != nil {
						t.Errorf("config.yaml in %s: %v", o.GetName(), err)
					}
					sawConfig = true
				}
			}
			if !sawConfig {
				t.Error("no informerd config in the rendered manifests")
			}
		})
	}
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
