package schema_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	kschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/projection"
	"github.com/informerd/informerd/internal/schema"
)

var widgetGVK = kschema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// widgets parses testdata/widgets.json, a hand-written document with every
// shape the checker knows.
func widgets(t testing.TB) map[kschema.GroupVersionKind]*schema.Schema {
	t.Helper()
	data, err := os.ReadFile("testdata/widgets.json")
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := schema.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// split splits a path as the server does, with the projection's syntax.
func split(t testing.TB, path string) []string {
	t.Helper()
	m, err := projection.Compile([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	return m.Paths()[0]
}

func TestParseFindsKinds(t *testing.T) {
	kinds := widgets(t)
	for _, kind := range []string{"Widget", "WidgetList"} {
		if kinds[widgetGVK.GroupVersion().WithKind(kind)] == nil {
			t.Errorf("no schema for %s in %v", kind, kinds)
		}
	}
	if len(kinds) != 2 {
		t.Errorf("got %d kinds, want 2: %v", len(kinds), kinds)
	}
}

// TestCheck is the checker's semantics over every shape of schema: nested
// objects, lists (of lists) of objects, maps, unknown fields kept, $ref and
// allOf, and values with their own JSON form.
func TestCheck(t *testing.T) {
	w := widgets(t)[widgetGVK]
	for _, tt := range []struct {
		name string
		path string
		ok   bool
	}{
		{"a top-level field", "spec", true},
		{"apiVersion", "apiVersion", true},
		{"no such top-level field", "spek", false},
		{"through allOf and $ref", "metadata.name", true},
		{"a map", "metadata.labels", true},
		{"a map's key", "metadata.labels.tier", true},
		{"a quoted map key", "metadata.labels.`app.kubernetes.io/name`", true},
		{"below a map's string value", "metadata.labels.tier.x", false},
		{"a timestamp is a leaf", "metadata.creationTimestamp", true},
		{"below a timestamp", "metadata.creationTimestamp.x", false},
		{"a $ref sibling of properties", "status.phase", true},
		{"through a list of objects", "metadata.managedFields.manager", true},
		{"not in a list's elements", "metadata.managedFields.managr", false},
		{"an object without properties keeps anything", "metadata.managedFields.fieldsV1.f:metadata.f:labels", true},
		{"a list of inline objects", "status.conditions.type", true},
		{"a quantity is a leaf", "spec.size", true},
		{"below a quantity", "spec.size.value", false},
		{"below an int-or-string", "spec.port.x", false},
		{"below a boolean", "spec.enabled.x", false},
		{"through a list of lists", "spec.grid.weight", true},
		{"below a list of lists of integers", "spec.matrix.x", false},
		{"a map of objects", "spec.partsByName.anyKey.weight", true},
		{"a map of objects, wrong field", "spec.partsByName.anyKey.wieght", false},
		{"preserve-unknown-fields", "spec.config.a.b.c", true},
		{"an object without properties", "spec.raw.a.b", true},
		{"a schema without a type", "spec.anything.a.b", true},
		{"preserve-unknown-fields with properties: unknown", "spec.extra.other.x", true},
		{"preserve-unknown-fields with properties: known", "spec.extra.known.a", true},
		{"preserve-unknown-fields with properties: known, wrong field", "spec.extra.known.b", false},
		{"allOf of a $ref and properties: inherited", "spec.base.inherited", true},
		{"allOf of a $ref and properties: own", "spec.base.own", true},
		{"allOf of a $ref and properties: neither", "spec.base.other", false},
		{"a recursive schema", "spec.tree.children.children.children.name", true},
		{"a recursive schema, wrong field", "spec.tree.children.children.nam", false},
		{"an allOf loop", "spec.loop.x", false},
		{"a $ref the document lacks", "spec.missing.x", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := w.Check(split(t, tt.path))
			if (err == nil) != tt.ok {
				t.Fatalf("Check(%s) = %v, want ok %v", tt.path, err, tt.ok)
			}
			if err != nil && !errors.Is(err, schema.ErrInvalidPath) {
				t.Errorf("Check(%s) = %v, does not match ErrInvalidPath", tt.path, err)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	w := widgets(t)[widgetGVK]
	for _, tt := range []struct {
		name, path, want string
	}{
		{"top level", "spek",
			`field mask: path "spek": Widget has no field "spek" (did you mean spec?); its fields are apiVersion, kind, metadata, spec, status`},
		{"nested, with a suggestion", "spec.podIPz",
			`field mask: path "spec.podIPz": Widget has no field "podIPz" in spec (did you mean podIP?); its fields are anything, base, config, enabled, extra, grid, loop, matrix, missing, parts, partsByName, podIP, podIPs, port, raw, size, tree`},
		{"through a list", "metadata.managedFields.managr",
			`field mask: path "metadata.managedFields.managr": Widget has no field "managr" in metadata.managedFields (did you mean manager?); its fields are fieldsV1, manager`},
		{"no suggestion, a long list cut", "status.x",
			`field mask: path "status.x": Widget has no field "x" in status; its fields are conditions, f01, f02, f03, f04, f05, f06, f07, f08, f09, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, ... (2 more)`},
		{"a leaf", "metadata.creationTimestamp.x",
			`field mask: path "metadata.creationTimestamp.x": in Widget, metadata.creationTimestamp holds a value of type string (date-time) and has no fields; end the path there`},
		{"a quoted map key", "metadata.labels.`app.kubernetes.io/name`.x",
			"field mask: path \"metadata.labels.`app.kubernetes.io/name`.x\": in Widget, metadata.labels.`app.kubernetes.io/name` holds a value of type string and has no fields; end the path there"},
		{"a quantity", "spec.size.x",
			`field mask: path "spec.size.x": in Widget, spec.size holds a value of type string or number and has no fields; end the path there`},
		{"an int-or-string", "spec.port.x",
			`field mask: path "spec.port.x": in Widget, spec.port holds a value of type int-or-string and has no fields; end the path there`},
		{"an allOf loop", "spec.loop.x",
			`field mask: path "spec.loop.x": Widget has no field "x" in spec.loop; its fields are none`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := w.Check(split(t, tt.path))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Check(%s) =\n%v\nwant\n%s", tt.path, err, tt.want)
			}
		})
	}
}

func TestNilSchemaChecksNothing(t *testing.T) {
	var s *schema.Schema
	if err := s.Check([]string{"anything", "at", "all"}); err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, data := range []string{`not json`, `{"components": {"schemas": {"a": {"type": 1}}}}`} {
		if _, err := schema.Parse([]byte(data)); err == nil {
			t.Errorf("Parse(%s) succeeded", data)
		}
	}
	kinds, err := schema.Parse([]byte(`{"openapi": "3.0.0"}`))
	if err != nil || len(kinds) != 0 {
		t.Errorf("Parse of a document without components = %v, %v; want no kinds", kinds, err)
	}
}

// FuzzCheck: Check never panics, and a path it accepts has every prefix
// accepted too (the checker walks a path one field at a time).
func FuzzCheck(f *testing.F) {
	for _, p := range []string{"spec.tree.children.name", "metadata.labels.a.b", "spec.loop.x", "spec.grid.weight", "status.conditions.type", "spec.extra.known.a", "x..y"} {
		f.Add(p)
	}
	kinds := widgets(f)
	f.Fuzz(func(t *testing.T, p string) {
		path := strings.Split(p, ".")
		if len(path) > projection.MaxDepth {
			path = path[:projection.MaxDepth]
		}
		for _, s := range kinds {
			if s.Check(path) != nil {
				continue
			}
			for i := range path {
				if err := s.Check(path[:i]); err != nil {
					t.Fatalf("Check(%q) = nil but Check(%q) = %v", path, path[:i], err)
				}
			}
		}
	})
}
