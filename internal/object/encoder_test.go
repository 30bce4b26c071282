package object

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
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
	o, err := enc.EncodeUnstructured(testPod())
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
	if err := json.Unmarshal(o.data, &back); err != nil {
		t.Fatal(err)
	}
	md := back["metadata"].(map[string]any)
	if _, ok := md["managedFields"]; ok {
		t.Error("managedFields kept, want stripped")
	}
	if back["kind"] != "Pod" || back["apiVersion"] != "v1" {
		t.Errorf("JSON lost apiVersion/kind: %s", o.data)
	}
}

func TestEncodeKeepsManagedFieldsWhenAsked(t *testing.T) {
	enc, err := NewEncoder(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	o, err := enc.EncodeUnstructured(testPod())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Metadata struct {
			ManagedFields []any `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(o.data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Metadata.ManagedFields) != 1 {
		t.Errorf("managedFields = %v, want kept", back.Metadata.ManagedFields)
	}
}

func TestClusterScopedKey(t *testing.T) {
	enc, _ := NewEncoder(nil, true)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1", "resourceVersion": "x"}}}
	o, err := enc.EncodeUnstructured(u)
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

func TestParseRV(t *testing.T) {
	tests := []struct {
		name   string
		rv     string
		want   uint64
		wantOK bool
	}{
		{name: "revision", rv: "42", want: 42, wantOK: true},
		{name: "largest", rv: "18446744073709551615", want: 1<<64 - 1, wantOK: true},
		{name: "empty", rv: ""},
		{name: "not a number", rv: "x1"},
		{name: "negative", rv: "-1"},
		// FuzzResourceVersion found that ParseUint's out-of-range result,
		// the largest uint64, came back instead of 0.
		{name: "out of range", rv: "18446744073709551616"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := ParseRV(tt.rv); got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRV(%q) = %d, %v; want %d, %v", tt.rv, got, ok, tt.want, tt.wantOK)
			}
		})
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
		o, err := enc.EncodeUnstructured(u)
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
	if diff := cmp.Diff([]int64{0, 0, 3}, enc.IndexErrors()); diff != "" {
		t.Errorf("IndexErrors, want the out-of-range lookups counted (-want +got):\n%s", diff)
	}
}

// podWithConditions is testPod's JSON with status.conditions.
func podWithConditions(t *testing.T, conditions []any) []byte {
	t.Helper()
	u := testPod()
	u.Object["status"] = map[string]any{"conditions": conditions}
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEncodeWithIndexErrors: each failing index is counted on its own and
// named in the result; the others keep their values.
func TestEncodeWithIndexErrors(t *testing.T) {
	enc, err := NewEncoder([]IndexSpec{
		{Name: "node", JSONPath: "{.spec.nodeName}"},
		{Name: "first-cond", JSONPath: "{.status.conditions[0].type}"},
		{Name: "second-image", JSONPath: "{.spec.containers[5].image}"},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		conditions []any
		wantFailed []string
		wantValues [][]string
	}{
		{name: "both fail", conditions: []any{}, wantFailed: []string{"first-cond", "second-image"}, wantValues: [][]string{{"demo"}, {"node-1"}, nil, nil}},
		{name: "one fails", conditions: []any{map[string]any{"type": "Ready"}}, wantFailed: []string{"second-image"}, wantValues: [][]string{{"demo"}, {"node-1"}, {"Ready"}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRaw(podWithConditions(t, tt.conditions))
			if err != nil {
				t.Fatal(err)
			}
			o, failed, err := enc.EncodeWithIndexErrors(r)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range failed {
				if f.Err == nil {
					t.Errorf("index %q failed without an error", f.Index)
				}
				names = append(names, f.Index)
			}
			if diff := cmp.Diff(tt.wantFailed, names); diff != "" {
				t.Errorf("failed indexes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantValues, o.Values); diff != "" {
				t.Errorf("Values (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]int64{0, 0, 1, 2}, enc.IndexErrors()); diff != "" {
		t.Errorf("IndexErrors (-want +got):\n%s", diff)
	}
}

// TestIndexErrorsConcurrentEncode encodes from several goroutines, as
// nothing forbids: under -race the count of failed evaluations must be
// race-free, and exact.
func TestIndexErrorsConcurrentEncode(t *testing.T) {
	enc, err := NewEncoder([]IndexSpec{
		{Name: "node", JSONPath: "{.spec.nodeName}"},
		{Name: "first-cond", JSONPath: "{.status.conditions[0].type}"},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	data := podWithConditions(t, []any{})
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				r, err := ParseRaw(slices.Clone(data))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := enc.Encode(r); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]int64{0, 0, goroutines * each}, enc.IndexErrors()); diff != "" {
		t.Errorf("IndexErrors (-want +got):\n%s", diff)
	}
}

func TestBadJSONPath(t *testing.T) {
	if _, err := NewEncoder([]IndexSpec{{Name: "x", JSONPath: "{.a["}}, true); err == nil {
		t.Error("NewEncoder accepted a broken JSONPath")
	}
}

// FuzzIndexJSONPath feeds arbitrary JSONPath expressions and objects (a
// custom resource may hold any JSON): NewEncoder either rejects the
// expression or Encode works without panicking, gives one sorted, duplicate
// free list of values per index, gives the same values every time (client-go
// changes a parsed {range} template as it runs it), and keeps the object's
// key, labels and JSON.
func FuzzIndexJSONPath(f *testing.F) {
	pod, err := json.Marshal(testPod().Object)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"{.spec.nodeName}", "{.spec.containers[*].image}", "{.metadata.labels.app}", "{range .spec.containers[*]}{.name}{end}",
		"{.spec.priority}", "{.status.conditions[0].type}", "{.spec.containers[-1:].name}", "{.spec.containers[?(@.image==\"web:1\")].name}",
		"{..image}", "{.spec.containers[0:2:1]}", "{.metadata.labels['app']}", "{$.kind}", "plain text", "{.a[", "{range .x}",
	} {
		f.Add(s, pod)
	}
	for _, doc := range []string{
		`{"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"containers": {"image": "x"}, "nodeName": ["a", "a", 1, null, true, 2.5]}}`,
		`{"metadata": "x", "spec": [1, 2, {"image": "y"}], "status": {"conditions": [{"type": "Ready"}, {"type": "Ready"}]}}`,
		`{"metadata": {"namespace": "ns", "name": "x/y", "labels": {"a": 1}, "resourceVersion": "007"}}`,
		`{}`,
		`[]`,
	} {
		f.Add("{.spec.containers[*].image}", []byte(doc))
		f.Add("{range .status.conditions[*]}{.type}{end}", []byte(doc))
	}
	f.Fuzz(func(t *testing.T, path string, doc []byte) {
		enc, err := NewEncoder([]IndexSpec{{Name: "f", JSONPath: path}}, true)
		if err != nil {
			return
		}
		var u unstructured.Unstructured
		if utiljson.Unmarshal(doc, &u.Object) != nil || u.Object == nil || hasDuplicateKeys(doc) {
			// Not an object, or one the API server would never send (it
			// does not repeat keys); for those the first value wins here.
			return
		}
		r, err := ParseRaw(slices.Clone(doc))
		if err != nil {
			return // metadata fields that are not strings
		}
		first, err := enc.Encode(r)
		if err != nil {
			return // labels that are not strings
		}
		r, _ = ParseRaw(slices.Clone(doc))
		second, err := enc.Encode(r)
		if err != nil {
			t.Fatalf("second Encode of the same object failed: %v", err)
		}
		if len(second.Values) != 2 {
			t.Fatalf("Values = %q, want one list per index (namespace, f)", second.Values)
		}
		if diff := cmp.Diff(first.Values, second.Values); diff != "" {
			t.Fatalf("index values differ between two objects alike (-first +second):\n%s", diff)
		}
		// The values are what client-go's JSONPath finds in the object
		// decoded as unstructured (how informerd evaluated indexes before
		// it read the JSON directly).
		if want, ok := oracleValues(path, u.Object); ok && !cmp.Equal(want, second.Values[1], cmpopts.EquateEmpty()) {
			t.Errorf("index values = %q, want %q as client-go's JSONPath finds them", second.Values[1], want)
		}
		if ns := u.GetNamespace(); len(second.Values[0]) != 1 || second.Values[0][0] != ns {
			t.Errorf("namespace index = %q, want [%q]", second.Values[0], ns)
		}
		for i := 1; i < len(second.Values[1]); i++ {
			if second.Values[1][i-1] >= second.Values[1][i] {
				t.Fatalf("index values %q are not sorted and free of duplicates", second.Values[1])
			}
		}
		if second.Key != KeyOf(u.GetNamespace(), u.GetName()) || second.Namespace != u.GetNamespace() || second.Name != u.GetName() {
			t.Errorf("key %q (namespace %q, name %q) for namespace %q name %q", second.Key, second.Namespace, second.Name, u.GetNamespace(), u.GetName())
		}
		labels := u.GetLabels()
		if len(second.Labels) != 2*len(labels) {
			t.Errorf("Labels = %q, want %v", second.Labels, labels)
		}
		for k, v := range labels {
			if got, ok := second.Labels.Lookup(k); !ok || got != v {
				t.Errorf("label %q = %q (present %v), want %q", k, got, ok, v)
			}
		}
		var want, back map[string]any
		if err := json.Unmarshal(second.data, &back); err != nil {
			t.Fatalf("cached JSON does not decode: %v", err)
		}
		if err := json.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		if md, ok := want["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		if diff := cmp.Diff(want, back); diff != "" {
			t.Errorf("cached JSON is not the object without managedFields (-object +JSON):\n%s", diff)
		}
		var msg pb.Object
		wire, err := second.Wire()
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(wire, &msg); err != nil {
			t.Fatalf("Wire does not decode: %v", err)
		}
		if msg.Namespace != second.Namespace || msg.Name != second.Name || msg.Uid != second.UID || msg.ResourceVersion != second.ResourceVersion || !bytes.Equal(msg.Json, second.data) {
			t.Errorf("Wire decodes to %v, want the object's fields", &msg)
		}
	})
}

// oracleValues evaluates an index expression the way informerd did on
// unstructured objects, on the whole decoded object; ok is false when that
// evaluation failed.
func oracleValues(expr string, obj map[string]any) ([]string, bool) {
	vs, err := findValues("oracle", expr, obj)
	return vs, err == nil
}

// hasDuplicateKeys reports whether some JSON object in doc repeats a key.
func hasDuplicateKeys(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				key, _ := k.(string)
				if seen[key] {
					return true
				}
				seen[key] = true
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		}
		return false
	}
	return walk()
}

// TestPrepare: a prepared object is transformed and copied once, out of
// the borrowed buffer; Encode keeps that copy; an object prepared as a
// cached one shares the cached bytes; and the Object encodes the same as
// without Prepare.
func TestPrepare(t *testing.T) {
	enc, err := NewEncoder([]IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}, {Name: "app", Label: "app"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(testPod().Object)
	if err != nil {
		t.Fatal(err)
	}
	want, err := enc.Encode(mustParse(t, slices.Clone(data)))
	if err != nil {
		t.Fatal(err)
	}

	borrowed := slices.Clone(data)
	r := mustParse(t, borrowed)
	enc.Prepare(r)
	for i := range borrowed {
		borrowed[i] = 'x' // the caller's buffer is reused
	}
	if cap(r.JSON) != len(r.JSON) {
		t.Errorf("prepared JSON has %d bytes of room, want none", cap(r.JSON)-len(r.JSON))
	}
	got, err := enc.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Object{})); diff != "" {
		t.Errorf("prepared object encodes differently (-unprepared +prepared):\n%s", diff)
	}
	if &got.data[0] != &r.JSON[0] {
		t.Error("Encode copied a prepared object's JSON")
	}

	again := mustParse(t, slices.Clone(data))
	PrepareAs(again, want)
	shared, err := enc.Encode(again)
	if err != nil {
		t.Fatal(err)
	}
	if &shared.data[0] != &want.data[0] {
		t.Error("an object prepared as a cached one does not share its bytes")
	}
	if diff := cmp.Diff(want, shared, cmp.AllowUnexported(Object{})); diff != "" {
		t.Errorf("object prepared as a cached one (-cached +got):\n%s", diff)
	}
}

func mustParse(t *testing.T, data []byte) *Raw {
	t.Helper()
	r, err := ParseRaw(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPrepareCutsManagedFields holds Prepare's one-scan cut to deleting
// the key from the decoded object, wherever managedFields sits in
// metadata and however the JSON is spaced.
func TestPrepareCutsManagedFields(t *testing.T) {
	for _, data := range []string{
		`{"kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"x"}],"uid":"u"}}`,
		`{"kind":"Pod","metadata":{"managedFields":[{"manager":"x"}],"name":"a"}}`,
		`{"kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"x"}]}}`,
		`{"kind":"Pod","metadata":{"managedFields":[]}}`,
		"{ \"kind\" : \"Pod\" , \"metadata\" : { \"name\" : \"a\" ,\n \"managedFields\" :\t[ {\"m\":\"}\"} ] , \"uid\":\"u\" } }",
		"{\"metadata\":{ \"managedFields\" : null ,\r\n \"name\":\"a\"}}",
		`{"kind":"Pod","spec":{"managedFields":[1]},"metadata":{"name":"a"}}`,
		`{"kind":"Pod","metadata":{"name":"managedFields"}}`,
	} {
		checkCut(t, []byte(data))
	}
}

func FuzzPrepareCutsManagedFields(f *testing.F) {
	f.Add([]byte(`{"kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"x"}],"uid":"u"}}`))
	f.Add([]byte(`{"metadata":{"managedFields":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		checkCut(t, data)
	})
}

// checkCut prepares data with managedFields stripped and compares the
// result with the decoded object without metadata.managedFields.
func checkCut(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("test input %q: %v", data, err)
	}
	if md, ok := want["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	enc, err := NewEncoder(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	r := &Raw{JSON: slices.Clone(data)}
	enc.Prepare(r)
	var got map[string]any
	if err := json.Unmarshal(r.JSON, &got); err != nil {
		t.Fatalf("Prepare(%q) = %q, not JSON: %v", data, r.JSON, err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Object{})); diff != "" {
		t.Errorf("Prepare(%q) = %q (-want +got):\n%s", data, r.JSON, diff)
	}
}
