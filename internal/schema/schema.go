// Package schema knows the schemas of Kubernetes resources, as the API
// server publishes them in OpenAPI v3 (built-in types, and custom resources
// with a structural schema), and checks field mask paths against them: a
// path that names no field of the resource is the client's mistake, and the
// error says which fields there are.
//
// A path uses the object's JSON field names. A path through a list goes on
// into each element, through a map (additionalProperties) into the value
// under any key, and below x-kubernetes-preserve-unknown-fields or an object
// without declared properties anything is allowed. A value with its own
// JSON form (a timestamp, a quantity, an int-or-string) has no fields.
//
// Parse reads one group-version's document; a Source fetches them from the
// API server as they are needed and keeps them.
package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidPath is what every error of Check matches (errors.Is): the path
// names no field of the resource.
var ErrInvalidPath = errors.New("schema: the path names no field")

// maxListed bounds the field names an error lists.
const maxListed = 20

// maxHops bounds how far one step of a path follows allOf members and list
// items, so that a schema referring to itself cannot loop.
const maxHops = 8

// Schema is one kind's schema. It is immutable: any goroutine may call
// Check. The nil Schema checks nothing.
type Schema struct {
	kind string
	root *node
}

// node is one schema, its $refs resolved: fields by name, the value under
// any key of a map, the element of a list, open when anything goes below it,
// leaf when its value has no fields (the leaf says what it is). A node also
// has every field of its allOf members (all).
type node struct {
	fields map[string]*node
	values *node
	items  *node
	open   bool
	leaf   string
	all    []*node
}

// Check returns nil when path, a field mask path split into its field
// names (as projection.Mask.Paths gives them), names a field of the schema or may (under a map or where unknown
// fields are kept); otherwise an error matching ErrInvalidPath that says
// what is wrong and what the fields there are.
func (s *Schema) Check(path []string) error {
	if s == nil {
		return nil
	}
	n := s.root
	for i, name := range path {
		n = n.element()
		if c := n.field(name); c != nil {
			n = c
			continue
		}
		if v := n.mapValues(); v != nil {
			n = v
			continue
		}
		if n.isOpen() {
			return nil
		}
		if leaf := n.leafType(); leaf != "" {
			return &pathError{fmt.Sprintf("field mask: path %q: in %s, %s holds a value of type %s and has no fields; end the path there",
				join(path), s.kind, join(path[:i]), leaf)}
		}
		return &pathError{fmt.Sprintf("field mask: path %q: %s has no field %q%s%s; its fields are %s",
			join(path), s.kind, name, in(path[:i]), suggest(name, n.fieldNames()), list(n.fieldNames()))}
	}
	return nil
}

// pathError is an error of Check.
type pathError struct{ msg string }

func (e *pathError) Error() string        { return e.msg }
func (e *pathError) Is(target error) bool { return target == ErrInvalidPath }

// element is n, or the element of the list n is (of the list of lists...):
// a path through a list applies to each element.
func (n *node) element() *node {
	for range maxHops {
		var items *node
		n.each(func(m *node) bool { items = m.items; return items != nil })
		if items == nil {
			return n
		}
		n = items
	}
	return n
}

func (n *node) field(name string) *node {
	var f *node
	n.each(func(m *node) bool { f = m.fields[name]; return f != nil })
	return f
}

func (n *node) mapValues() *node {
	var v *node
	n.each(func(m *node) bool { v = m.values; return v != nil })
	return v
}

func (n *node) isOpen() bool {
	var open bool
	n.each(func(m *node) bool { open = m.open; return open })
	return open
}

func (n *node) leafType() string {
	var leaf string
	n.each(func(m *node) bool { leaf = m.leaf; return leaf != "" })
	return leaf
}

// fieldNames returns the names of n's fields, sorted.
func (n *node) fieldNames() []string {
	var names []string
	n.each(func(m *node) bool {
		for name := range m.fields {
			names = append(names, name)
		}
		return false
	})
	slices.Sort(names)
	return slices.Compact(names)
}

// each calls f on n and then its allOf members, depth first, until f
// returns true.
func (n *node) each(f func(*node) bool) {
	n.eachHops(f, 0)
}

func (n *node) eachHops(f func(*node) bool, hops int) bool {
	if f(n) {
		return true
	}
	if hops == maxHops {
		return false
	}
	for _, m := range n.all {
		if m.eachHops(f, hops+1) {
			return true
		}
	}
	return false
}

// join writes path as a client would, quoting a name with a dot in
// backquotes.
func join(path []string) string {
	var b strings.Builder
	for i, name := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		if strings.Contains(name, ".") {
			name = "`" + name + "`"
		}
		b.WriteString(name)
	}
	return b.String()
}

// in says where in the object a field was looked for: nothing at the top.
func in(parent []string) string {
	if len(parent) == 0 {
		return ""
	}
	return " in " + join(parent)
}

// list writes names, at most maxListed of them.
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d more)", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// suggest names the field the client probably meant: the same name in
// another case, or one at most two edits away.
func suggest(name string, names []string) string {
	best, bestDist := "", 3
	for _, c := range names {
		d := distance(strings.ToLower(name), strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// distance is the Levenshtein distance of a and b, in bytes; names are
// short.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // too long to be a typo worth a quadratic look
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
