package object

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testPod() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name": "web-1", "namespace": "demo", "uid": "u-1", "resourceVersion": "42",
			"labels":        map[string]any{"app": "web", "tier": "front"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{
			"nodeName": "node-1",
			"containers": []any{
				map[string]any{"name": "a", "image": "web:1"},
				map[string]any{"name": "b", "image": "proxy:2"},
				map[string]any{"name": "c", "image": "web:1"},
			},
			"priority": int64(7),
		},
	}}
}

func TestEncode(t *testing.T) {
	enc, err := NewEncoder([]IndexSpec{
		{Name: "node", JSONPath: "{.spec.nodeName}"},
		{Name: "image", JSONPath: "{.spec.containers[*].image}"},
		{Name: "app", Label: "app"},
		{Name: "missing", Label: "nope"},
		{Name: "prio", JSONPath: "{.spec.priority}"},
		{Name: "absent", JSONPath: "{.spec.nothing}"},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	o, err := enc.Encode(testPod())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"namespace", "node", "image", "app", "missing", "prio", "absent"}, enc.IndexNames()); diff != "" {
		t.Errorf("IndexNames (-want +got):\n%s", diff)
	}
	want := [][]string{{"demo"}, {"node-1"}, {"proxy:2", "web:1"}, {"web"}, nil, {"7"}, nil}
	if diff := cmp.Diff(want, o.Values); diff != "" {
		t.Errorf("Values (-want +got):\n%s", diff)
	}
	if o.Key != "demo/web-1" || o.Namespace != "demo" || o.Name != "web-1" || o.UID != "u-1" || o.ResourceVersion != "42" || o.RV != 42 {
		t.Errorf("metadata = %+v", o)
	}
	if v, ok := o.Labels.Lookup("tier"); !ok || v != "front" || o.Labels.Has("nope") {
		t.Errorf("Labels = %v", o.Labels)
	}
	var back map[string]any
	if err := json.Unmarshal(o.JSON, &back); err != nil {
		t.Fatal(err)
	}
	md := back["metadata"].(map[string]any)
	if _, ok := md["managedFields"]; ok {
		t.Error("managedFields kept, want stripped")
	}
	if back["kind"] != "Pod" || back["apiVersion"] != "v1" {
		t.Errorf("JSON lost apiVersion/kind: %s", o.JSON)
	}
}

func TestEncodeKeepsManagedFieldsWhenAsked(t *testing.T) {
	enc, err := NewEncoder(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	o, err := enc.Encode(testPod())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Metadata struct {
			ManagedFields []any `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(o.JSON, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Metadata.ManagedFields) != 1 {
		t.Errorf("managedFields = %v, want kept", back.Metadata.ManagedFields)
	}
}

func TestClusterScopedKey(t *testing.T) {
	enc, _ := NewEncoder(nil, true)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1", "resourceVersion": "x"}}}
	o, err := enc.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != "n1" || o.Namespace != "" || o.RV != 0 {
		t.Errorf("cluster-scoped object = key %q ns %q rv %d", o.Key, o.Namespace, o.RV)
	}
	if ns, name := SplitKey(o.Key); ns != "" || name != "n1" {
		t.Errorf("SplitKey(%q) = %q, %q", o.Key, ns, name)
	}
}

func TestJSONPathRangeAndOutOfRange(t *testing.T) {
	enc, err := NewEncoder([]IndexSpec{
		{Name: "images", JSONPath: "{range .spec.containers[*]}{.image}{end}"},
		{Name: "first-cond", JSONPath: "{.status.conditions[0].type}"},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	// {range} must work on every object, not only the first.
	for i := range 3 {
		u := testPod()
		u.Object["status"] = map[string]any{"conditions": []any{}}
		o, err := enc.Encode(u)
		if err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		if diff := cmp.Diff([]string{"proxy:2", "web:1"}, o.Values[1]); diff != "" {
			t.Errorf("object %d range index (-want +got):\n%s", i, diff)
		}
		if o.Values[2] != nil {
			t.Errorf("object %d: index into a missing list = %v, want no value", i, o.Values[2])
		}
	}
	if enc.IndexErrors == 0 {
		t.Error("IndexErrors = 0, want the out-of-range lookups counted")
	}
}

func TestBadJSONPath(t *testing.T) {
	if _, err := NewEncoder([]IndexSpec{{Name: "x", JSONPath: "{.a["}}, true); err == nil {
		t.Error("NewEncoder accepted a broken JSONPath")
	}
}

// FuzzIndexJSONPath feeds arbitrary JSONPath expressions: NewEncoder either
// rejects them or Encode works without panicking.
func FuzzIndexJSONPath(f *testing.F) {
	for _, s := range []string{"{.spec.nodeName}", "{.spec.containers[*].image}", "{.metadata.labels.app}", "{range .spec.containers[*]}{.name}{end}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		enc, err := NewEncoder([]IndexSpec{{Name: "f", JSONPath: path}}, true)
		if err != nil {
			return
		}
		_, _ = enc.Encode(testPod())
	})
}
