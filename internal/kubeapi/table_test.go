package kubeapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/testenv"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// table asks c for path as a Table, as kubectl get does.
func table(t *testing.T, c rest.Interface, path string) *metav1.Table {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := c.Get().AbsPath(path).SetHeader("Accept", tableAccept).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s as a Table: %v", path, err)
	}
	var tb metav1.Table
	if err := json.Unmarshal(body, &tb); err != nil || tb.Kind != "Table" {
		t.Fatalf("GET %s as a Table: %v, kind %q: %s", path, err, tb.Kind, body)
	}
	return &tb
}

// rows are a table's cells, with columns of type date left out (an age
// changes by the second).
func rows(tb *metav1.Table) [][]any {
	var out [][]any
	for _, r := range tb.Rows {
		var cells []any
		for i, c := range r.Cells {
			if i < len(tb.ColumnDefinitions) && tb.ColumnDefinitions[i].Type != "date" && tb.ColumnDefinitions[i].Name != "Age" {
				cells = append(cells, c)
			}
		}
		out = append(out, cells)
	}
	return out
}

func columnNames(tb *metav1.Table) []string {
	var out []string
	for _, c := range tb.ColumnDefinitions {
		out = append(out, c.Name)
	}
	return out
}

// TestTableOfACustomResource prints a CRD's additionalPrinterColumns, and a
// built-in type's columns, as the API server does.
func TestTableOfACustomResource(t *testing.T) {
	ctx := testContext(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets.kapi.example.com"},
		"spec": map[string]any{
			"group": "kapi.example.com",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
					map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": int64(1)},
					map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
				},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) { // from an earlier run (-count)
		t.Fatal(err)
	}
	ns := namespace("kapi-table")
	f := setupWith(t, ns, "resources: [{resource: gadgets.kapi.example.com}, {resource: configmaps}]")
	gadgets := schema.GroupVersionResource{Group: "kapi.example.com", Version: "v1", Resource: "gadgets"}
	var last string
	for i, color := range []string{"red", "blue"} {
		g, err := dyn.Resource(gadgets).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kapi.example.com/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": color},
			"spec":     map[string]any{"color": color, "size": int64(i + 1)},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = g.GetResourceVersion()
	}
	testenv.Eventually(t, time.Minute, "gadgets cached", func() bool {
		p, ok := f.set.Lookup("gadgets.kapi.example.com")
		if !ok || !p.Cache().Stats().Synced {
			return false
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return p.Cache().WaitFor(wctx, last) == nil
	})
	direct, cached := f.direct.CoreV1().RESTClient(), f.cached.CoreV1().RESTClient()
	for _, path := range []string{"/apis/kapi.example.com/v1/namespaces/" + ns + "/gadgets", "/apis/kapi.example.com/v1/namespaces/" + ns + "/gadgets/red", "/api/v1/namespaces/" + ns + "/configmaps"} {
		want, got := table(t, direct, path), table(t, cached, path)
		if diff := cmp.Diff(columnNames(want), columnNames(got)); diff != "" {
			t.Errorf("%s columns (-api server +informerd):\n%s", path, diff)
		}
		if diff := cmp.Diff(rows(want), rows(got)); diff != "" {
			t.Errorf("%s rows (-api server +informerd):\n%s", path, diff)
		}
	}
}

// TestCustomResourceSelectableFields selects custom resources by their
// CRD's selectableFields, from the cache, as the API server does, and
// refuses any other field in its words.
func TestCustomResourceSelectableFields(t *testing.T) {
	ctx := testContext(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.kapi.example.com"},
		"spec": map[string]any{
			"group": "kapi.example.com",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"color": map[string]any{"type": "string"},
						"size":  map[string]any{"type": "integer"},
						"shiny": map[string]any{"type": "boolean"},
					}},
				}}},
				"selectableFields": []any{
					map[string]any{"jsonPath": ".spec.color"},
					map[string]any{"jsonPath": ".spec.size"},
					map[string]any{"jsonPath": ".spec.shiny"},
				},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ns := namespace("kapi-selectable")
	f := setupWith(t, ns, "resources: [{resource: widgets.kapi.example.com}]")
	widgets := schema.GroupVersionResource{Group: "kapi.example.com", Version: "v1", Resource: "widgets"}
	var last string
	for i, color := range []string{"red", "blue", "red", ""} {
		spec := map[string]any{"size": int64(i), "shiny": i%2 == 0}
		if color != "" {
			spec["color"] = color
		}
		w, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kapi.example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i)},
			"spec":     spec,
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = w.GetResourceVersion()
	}
	f.waitRV(t, "widgets.kapi.example.com", last)
	path := "/apis/kapi.example.com/v1/namespaces/" + ns + "/widgets"
	for _, sel := range []string{"spec.color=red", "spec.color!=red", "spec.color=", "spec.size=2", "spec.shiny=true", "spec.color=red,spec.size=0", "metadata.name=w1", "spec.missing=x", "status.phase=x"} {
		t.Run(sel, func(t *testing.T) {
			q := path + "?fieldSelector=" + url.QueryEscape(sel)
			direct, cached := raw(t, env.Config, q, ""), raw(t, f.cachedConfig, q, "")
			if direct.code != cached.code {
				t.Fatalf("informerd answered %d, the API server %d: %s", cached.code, direct.code, cached.body)
			}
			if direct.code != http.StatusOK {
				sameAs(t, "the refusal", string(direct.body), string(cached.body))
				return
			}
			sameAs(t, "the selected widgets", shapeOf(t, direct).Items, shapeOf(t, cached).Items)
		})
	}
}
