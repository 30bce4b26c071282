package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	kschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	extGVK             = "x-kubernetes-group-version-kind"
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extIntOrString     = "x-kubernetes-int-or-string"
	refPrefix          = "#/components/schemas/"
)

// Parse reads an OpenAPI v3 document (as the API server serves one per
// group-version under /openapi/v3) and returns the schema of every kind it
// names in an x-kubernetes-group-version-kind extension.
func Parse(data []byte) (map[kschema.GroupVersionKind]*Schema, error) {
	// Only the schemas: decoding the paths' operations too would take as long
	// again.
	var doc struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("schema: parse OpenAPI v3 document: %w", err)
	}
	kinds := map[kschema.GroupVersionKind]*Schema{}
	c := &compiler{schemas: doc.Components.Schemas, refs: map[string]*node{}}
	for name, s := range doc.Components.Schemas {
		if s == nil {
			continue
		}
		for _, gvk := range gvks(s.Extensions) {
			kinds[gvk] = &Schema{kind: gvk.Kind, root: c.ref(name)}
		}
	}
	return kinds, nil
}

// gvks reads the x-kubernetes-group-version-kind extension: a list of
// {group, version, kind}.
func gvks(ext spec.Extensions) []kschema.GroupVersionKind {
	list, _ := ext[extGVK].([]any)
	var out []kschema.GroupVersionKind
	for _, e := range list {
		m, _ := e.(map[string]any)
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if v != "" && k != "" {
			out = append(out, kschema.GroupVersionKind{Group: g, Version: v, Kind: k})
		}
	}
	return out
}

// compiler turns the document's schemas into nodes, each component once:
// a component that refers to itself (JSONSchemaProps) becomes a cycle.
type compiler struct {
	schemas map[string]*spec.Schema
	refs    map[string]*node
}

// ref returns the node of the component named name. One that the document
// lacks allows anything: informerd cannot know its fields.
func (c *compiler) ref(name string) *node {
	if n, ok := c.refs[name]; ok {
		return n
	}
	n := &node{}
	c.refs[name] = n // before filling it, for the cycles
	s := c.schemas[name]
	if s == nil {
		n.open = true
		return n
	}
	c.fill(n, s)
	return n
}

func (c *compiler) compile(s *spec.Schema) *node {
	n := &node{}
	c.fill(n, s)
	return n
}

func (c *compiler) fill(n *node, s *spec.Schema) {
	if r := s.Ref.String(); r != "" {
		// In OpenAPI 3.0 a $ref's siblings are ignored.
		if name, ok := strings.CutPrefix(r, refPrefix); ok {
			n.all = []*node{c.ref(unescape(name))}
		} else {
			n.open = true
		}
		return
	}
	if keep, _ := s.Extensions.GetBool(extPreserveUnknown); keep {
		n.open = true
	}
	for name, p := range s.Properties {
		if n.fields == nil {
			n.fields = map[string]*node{}
		}
		n.fields[name] = c.compile(&p)
	}
	if ap := s.AdditionalProperties; ap != nil {
		switch {
		case ap.Schema != nil:
			n.values = c.compile(ap.Schema)
		case ap.Allows:
			n.open = true
		}
	}
	for i := range s.AllOf {
		n.all = append(n.all, c.compile(&s.AllOf[i]))
	}
	types := typesOf(s)
	switch {
	case s.Items != nil && s.Items.Schema != nil:
		n.items = c.compile(s.Items.Schema)
	case len(types) == 1 && types[0] == "array":
		n.open = true // a list of what, it does not say (or a tuple)
	}
	if isIntOrString, _ := s.Extensions.GetBool(extIntOrString); isIntOrString {
		n.leaf = "int-or-string"
		return
	}
	if len(n.fields) > 0 || n.values != nil || n.items != nil || n.open || len(n.all) > 0 {
		return
	}
	scalars := strings.Join(deleteAll(types, "object", "array"), " or ")
	if scalars == "" {
		n.open = true // an object without declared properties (RawExtension, FieldsV1), or no type at all
		return
	}
	if s.Format != "" {
		scalars += " (" + s.Format + ")"
	}
	n.leaf = scalars
}

// typesOf is s's type, or the types of its oneOf or anyOf members (a
// Quantity is a string or a number), without null.
func typesOf(s *spec.Schema) []string {
	types := deleteAll(s.Type, "null")
	if len(types) > 0 {
		return types
	}
	for _, members := range [][]spec.Schema{s.OneOf, s.AnyOf} {
		for _, m := range members {
			types = append(types, deleteAll(m.Type, "null")...)
		}
	}
	return types
}

func deleteAll(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(drop, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// unescape decodes a JSON pointer token.
func unescape(token string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(token)
}
