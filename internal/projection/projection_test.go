package projection

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const pod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"demo","uid":"u-1","resourceVersion":"42",` +
	`"labels":{"app.kubernetes.io/name":"web","tier":"front"},"annotations":{"a":"b"}},` +
	`"spec":{"nodeName":"node-1","containers":[{"name":"a","image":"web:1","ports":[{"containerPort":80}]},{"name":"b","image":"proxy:2"}]},` +
	`"status":{"podIP":"10.0.0.7","conditions":[{"type":"Ready","status":"True"}],"phase":"Running"}}`

// TestProject is the projection's semantics over a built-in object: nested
// maps, lists of objects, missing fields, label keys with dots and
// slashes, quoted names, and a mask covering the whole object.
func TestProject(t *testing.T) {
	keep := `"kind":"Pod","apiVersion":"v1"`
	meta := `"name":"web-1","namespace":"demo","uid":"u-1","resourceVersion":"42"`
	for _, tt := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"always kept", []string{"metadata.name"}, `{` + keep + `,"metadata":{` + meta + `}}`},
		{"a map with dotted keys", []string{"metadata.labels"}, `{` + keep + `,"metadata":{` + meta + `,"labels":{"app.kubernetes.io/name":"web","tier":"front"}}}`},
		{"one label, quoted", []string{"metadata.labels.`app.kubernetes.io/name`"}, `{` + keep + `,"metadata":{` + meta + `,"labels":{"app.kubernetes.io/name":"web"}}}`},
		{"a scalar deep down", []string{"status.podIP"}, `{` + keep + `,"metadata":{` + meta + `},"status":{"podIP":"10.0.0.7"}}`},
		{"through a list", []string{"spec.containers.image"}, `{` + keep + `,"metadata":{` + meta + `},"spec":{"containers":[{"image":"web:1"},{"image":"proxy:2"}]}}`},
		{"through two lists", []string{"spec.containers.ports.containerPort"}, `{` + keep + `,"metadata":{` + meta + `},"spec":{"containers":[{"ports":[{"containerPort":80}]},{}]}}`},
		{"missing fields", []string{"status.hostIP", "spec.nothing.deeper"}, `{` + keep + `,"metadata":{` + meta + `},"spec":{},"status":{}}`},
		{"a path through a scalar keeps it", []string{"status.phase.x"}, `{` + keep + `,"metadata":{` + meta + `},"status":{"phase":"Running"}}`},
		{"the whole object", []string{"kind", "apiVersion", "metadata", "spec", "status"}, pod},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Compile(tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Project([]byte(pod))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tt.want)), decode(t, got)); diff != "" {
				t.Errorf("Project(%q) = %s (-want +got):\n%s", tt.paths, got, diff)
			}
		})
	}
}

func TestEmptyMaskIsWholeObject(t *testing.T) {
	m, err := Compile(nil)
	if err != nil || m != nil {
		t.Fatalf("Compile(nil) = %v, %v; want the nil mask", m, err)
	}
	got, err := m.Project([]byte(pod))
	if err != nil || string(got) != pod {
		t.Errorf("the nil mask's projection = %s, %v; want the object", got, err)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, p := range []string{"", "a..b", ".a", "a.", "`a", "`a`b", strings.Repeat("a.", MaxDepth) + "a"} {
		if _, err := Compile([]string{p}); err == nil {
			t.Errorf("Compile(%q): no error", p)
		} else if !strings.Contains(err.Error(), "field mask") {
			t.Errorf("Compile(%q): %v; want an error naming the field mask", p, err)
		}
	}
	if _, err := Compile(make([]string, MaxPaths+1)); err == nil {
		t.Error("a mask over MaxPaths: no error")
	}
}

func TestKeyIgnoresOrder(t *testing.T) {
	a, _ := Compile([]string{"status.podIP", "metadata.labels"})
	b, _ := Compile([]string{"metadata.labels", "status.podIP", "metadata.labels"})
	c, _ := Compile([]string{"metadata.labels"})
	if a.Key() != b.Key() || a.Key() == c.Key() {
		t.Errorf("keys %q, %q, %q: want the first two equal and the third different", a.Key(), b.Key(), c.Key())
	}
}

// FuzzProject: projecting any JSON object with any mask never panics, and
// what it returns is JSON and a subset of the input.
func FuzzProject(f *testing.F) {
	f.Add([]byte(pod), "spec.containers.image,metadata.labels")
	f.Add([]byte(`{"a":[1,{"b":2}],"c":{"\u0064":"x\"y"}}`), "a.b,c.d")
	f.Add([]byte(`{"metadata":null}`), "metadata.labels.`x.y`")
	f.Fuzz(func(t *testing.T, data []byte, mask string) {
		var in map[string]any
		if json.Unmarshal(data, &in) != nil {
			return
		}
		m, err := Compile(strings.Split(mask, ","))
		if err != nil {
			return
		}
		got, err := m.Project(data)
		if err != nil {
			return // jsonparser is stricter than encoding/json on some inputs
		}
		var out map[string]any
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("Project(%q, %q) = %q, not JSON: %v", data, mask, got, err)
		}
		if !subset(out, in) {
			t.Errorf("Project(%q, %q) = %s, not a subset of the input", data, mask, got)
		}
	})
}

// subset reports whether a is b with members of objects left out.
func subset(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range a {
			bv, ok := bm[k]
			if !ok || !subset(v, bv) {
				return false
			}
		}
		return true
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !subset(a[i], bl[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

// TestSameBut compares two states of one object through a mask: a change
// the mask does not show, the resourceVersion included, is no change.
func TestSameBut(t *testing.T) {
	next := func(old, new string) string {
		if !strings.Contains(pod, old) {
			t.Fatalf("the pod has no %s", old)
		}
		return strings.Replace(strings.Replace(pod, old, new, 1), `"resourceVersion":"42"`, `"resourceVersion":"43"`, 1)
	}
	for _, tt := range []struct {
		name  string
		paths []string
		after string
		same  bool
	}{
		{"only the resourceVersion", []string{"status.podIP"}, next(`"a":"b"`, `"a":"b"`), true},
		{"a condition outside the mask", []string{"status.podIP", "metadata.labels"}, next(`"status":"True"`, `"status":"False"`), true},
		{"an annotation outside the mask", []string{"status.podIP"}, next(`"a":"b"`, `"a":"c"`), true},
		{"the IP in the mask", []string{"status.podIP"}, next(`10.0.0.7`, `10.0.0.8`), false},
		{"a label in the mask", []string{"metadata.labels"}, next(`"tier":"front"`, `"tier":"back"`), false},
		{"an annotation under whole metadata", []string{"metadata"}, next(`"a":"b"`, `"a":"c"`), false},
		{"only the resourceVersion under whole metadata", []string{"metadata"}, next(`"a":"b"`, `"a":"b"`), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Compile(tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.ProjectObject([]byte(pod))
			if err != nil {
				t.Fatal(err)
			}
			b, err := m.ProjectObject([]byte(tt.after))
			if err != nil {
				t.Fatal(err)
			}
			if got := a.SameBut(b); got != tt.same {
				t.Errorf("SameBut = %v, want %v:\n%s\n%s", got, tt.same, a.JSON, b.JSON)
			}
			if !strings.Contains(string(b.JSON), `"resourceVersion":"43"`) {
				t.Errorf("the projection lost the new resourceVersion: %s", b.JSON)
			}
		})
	}
}

// FuzzSameBut: a projection compared with the projection of the same
// object at another resourceVersion is the same, and one whose kept value
// changed is not.
func FuzzSameBut(f *testing.F) {
	f.Add([]byte(pod), "status.podIP", "43")
	f.Add([]byte(`{"metadata":{"resourceVersion":"1","x":{"y":[1,2]}}}`), "metadata.x.y", "2")
	f.Fuzz(func(t *testing.T, data []byte, mask, rv string) {
		var in map[string]any
		if json.Unmarshal(data, &in) != nil {
			return
		}
		meta, ok := in["metadata"].(map[string]any)
		if !ok {
			return
		}
		if _, ok := meta["resourceVersion"].(string); !ok {
			return // every object the cache holds has one
		}
		m, err := Compile(strings.Split(mask, ","))
		if err != nil {
			return
		}
		if _, err := m.ProjectObject(data); err != nil {
			return
		}
		// Compare like with like: both from encoding/json's encoding.
		a, err := m.ProjectObject(mustRemarshal(t, data))
		meta["resourceVersion"] = rv
		other, _ := json.Marshal(in)
		if err != nil {
			return
		}
		b, err := m.ProjectObject(other)
		if err != nil {
			t.Fatalf("project %s: %v", other, err)
		}
		if !a.SameBut(b) {
			t.Errorf("a change of resourceVersion alone shows through %q:\n%s\n%s", mask, a.JSON, b.JSON)
		}
		meta["resourceVersion"] = "x"
		meta["name"] = fmt.Sprint(meta["name"], "-changed") // always kept
		changed, _ := json.Marshal(in)
		c, err := m.ProjectObject(changed)
		if err != nil {
			t.Fatalf("project %s: %v", changed, err)
		}
		if a.SameBut(c) {
			t.Errorf("a changed name does not show through %q:\n%s\n%s", mask, a.JSON, c.JSON)
		}
	})
}

func mustRemarshal(t *testing.T, data []byte) []byte {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeyIsUnique: masks that project differently never share a key, even
// when a quoted name holds the characters a key is joined with.
func TestKeyIsUnique(t *testing.T) {
	pairs := [][2][]string{
		{{"metadata.labels.a", "metadata.labels.b"}, {"metadata.labels.`a,metadata.labels.b`"}},
		{{"status.phase"}, {"`status.phase`"}},
		{{"a.b"}, {"`a.b`"}},
		{{"a", "b"}, {"`a\",\"b`"}},
	}
	for _, p := range pairs {
		a, err := Compile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := Compile(p[1])
		if err != nil {
			t.Fatal(err)
		}
		if a.Key() == b.Key() {
			t.Errorf("%q and %q share the key %q", p[0], p[1], a.Key())
		}
	}
	if _, err := Compile([]string{"metadata.labels.`a\x00b`"}); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a name with a NUL: %v, want an error", err)
	}
}

// FuzzKey: two masks with one key project every object the same way.
func FuzzKey(f *testing.F) {
	f.Add([]byte(pod), "metadata.labels.a,metadata.labels.b", "metadata.labels.`a,metadata.labels.b`")
	f.Add([]byte(pod), "status.phase", "`status.phase`")
	f.Fuzz(func(t *testing.T, data []byte, x, y string) {
		a, err := Compile(splitOutsideQuotes(x))
		if err != nil {
			return
		}
		b, err := Compile(splitOutsideQuotes(y))
		if err != nil || a.Key() != b.Key() {
			return
		}
		pa, errA := a.Project(data)
		pb, errB := b.Project(data)
		if (errA == nil) != (errB == nil) || string(pa) != string(pb) {
			t.Errorf("%q and %q share a key but project %s to %s and %s", x, y, data, pa, pb)
		}
	})
}

// splitOutsideQuotes splits at commas outside backquotes.
func splitOutsideQuotes(s string) []string {
	var out []string
	quoted, start := false, 0
	for i, c := range s {
		switch {
		case c == '`':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
