// Package projection cuts a Kubernetes object's JSON down to the fields a
// client asked for: a field mask of dotted paths in the object's JSON field
// names ("metadata.labels", "status.podIP", "spec.containers.image"), as
// google.protobuf.FieldMask carries them. A path through a list applies to
// each element. The projection always keeps apiVersion, kind and
// metadata's name, namespace, uid and resourceVersion, so that a projected
// object is still an object a client can key, order and resume by.
//
// A projection works on the bytes: values kept are copied as they are,
// never decoded and encoded again, so the projected object is a subset of
// the original's JSON.
package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/buger/jsonparser"
)

// Always are the paths every projection keeps.
var Always = []string{"apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"}

// MaxPaths bounds the paths of one mask, and MaxDepth the segments of one
// path: a mask is a client's input.
const (
	MaxPaths = 100
	MaxDepth = 32
)

// Mask is a compiled field mask. The nil Mask keeps the whole object.
type Mask struct {
	root  *node
	key   string     // canonical form: the sorted paths, for sharing encodings
	paths [][]string // the paths asked for, split into field names
}

// node is one level of a mask: whole keeps the value as it is; otherwise
// fields names the members to keep, each with its own mask.
type node struct {
	whole  bool
	fields map[string]*node
}

// Compile builds a mask from paths. No paths means the whole object (a nil
// Mask). A path is dotted field names; a name holding dots or other
// characters may be quoted in backticks (metadata.labels.`app.kubernetes.io/name`).
func Compile(paths []string) (*Mask, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if len(paths) > MaxPaths {
		return nil, fmt.Errorf("field mask: %d paths, at most %d are allowed", len(paths), MaxPaths)
	}
	m := &Mask{root: &node{}}
	var canon []string
	for i, p := range append(slices.Clone(Always), paths...) {
		segs, err := split(p)
		if err != nil {
			return nil, err
		}
		m.root.add(segs)
		// Each name quoted: no name can make two masks' keys equal.
		quoted := make([]string, len(segs))
		for j, seg := range segs {
			quoted[j] = strconv.Quote(seg)
		}
		canon = append(canon, strings.Join(quoted, "."))
		if i >= len(Always) {
			m.paths = append(m.paths, segs)
		}
	}
	slices.Sort(canon)
	m.key = strings.Join(slices.Compact(canon), ",")
	return m, nil
}

// Paths returns the paths the mask was compiled from (not Always), each
// split into its field names; the caller must not modify them.
func (m *Mask) Paths() [][]string {
	if m == nil {
		return nil
	}
	return m.paths
}

// Key identifies the mask: two masks with the same key project every
// object the same way.
func (m *Mask) Key() string {
	if m == nil {
		return ""
	}
	return m.key
}

func (n *node) add(segs []string) {
	if n.whole {
		return
	}
	if len(segs) == 0 {
		n.whole, n.fields = true, nil
		return
	}
	if n.fields == nil {
		n.fields = map[string]*node{}
	}
	c := n.fields[segs[0]]
	if c == nil {
		c = &node{}
		n.fields[segs[0]] = c
	}
	c.add(segs[1:])
}

// split parses one path into its field names.
func split(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("field mask: an empty path; name a field such as metadata.labels")
	}
	var segs []string
	for rest := p; ; {
		var seg string
		if strings.HasPrefix(rest, "`") {
			end := strings.IndexByte(rest[1:], '`')
			if end < 0 {
				return nil, fmt.Errorf("field mask: path %q: a backquote is not closed", p)
			}
			seg, rest = rest[1:1+end], rest[2+end:]
			if rest != "" && !strings.HasPrefix(rest, ".") {
				return nil, fmt.Errorf("field mask: path %q: want a dot after a quoted name", p)
			}
		} else {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				i = len(rest)
			}
			seg, rest = rest[:i], rest[i:]
		}
		if seg == "" {
			return nil, fmt.Errorf("field mask: path %q has an empty field name; write fields as a.b.c", p)
		}
		if strings.ContainsFunc(seg, unicode.IsControl) {
			return nil, fmt.Errorf("field mask: path %q has a control character in a field name", p)
		}
		segs = append(segs, seg)
		if len(segs) > MaxDepth {
			return nil, fmt.Errorf("field mask: path %q is deeper than %d fields", p, MaxDepth)
		}
		if rest == "" {
			return segs, nil
		}
		rest = rest[1:] // the dot
		if rest == "" {
			return nil, fmt.Errorf("field mask: path %q ends with a dot", p)
		}
	}
}

// Project returns data, a JSON object, with only the fields m keeps, in
// their original order; a nil m returns data itself.
func (m *Mask) Project(data []byte) ([]byte, error) {
	p, err := m.ProjectObject(data)
	return p.JSON, err
}

// Projected is an object's projection, with where its
// metadata.resourceVersion member is, so that two projections of one
// object can be compared without it.
type Projected struct {
	JSON []byte
	// rv is the resourceVersion member's span in JSON ("resourceVersion":
	// and its value, no comma); empty when it has none.
	rv [2]int
}

// SameBut reports whether p and q are equal but for their metadata's
// resourceVersion: they show no change.
func (p Projected) SameBut(q Projected) bool {
	return bytes.Equal(p.JSON[:p.rv[0]], q.JSON[:q.rv[0]]) && bytes.Equal(p.JSON[p.rv[1]:], q.JSON[q.rv[1]:])
}

// ProjectObject is Project, and notes where the projection's
// metadata.resourceVersion is. A nil m returns data itself, and notes
// nothing: a whole object is compared whole.
func (m *Mask) ProjectObject(data []byte) (Projected, error) {
	if m == nil {
		return Projected{JSON: data}, nil
	}
	pr := projector{}
	pr.out.Grow(len(data) / 4)
	if err := pr.object(data, m.root, top); err != nil {
		return Projected{}, fmt.Errorf("project: %w", err)
	}
	return Projected{JSON: pr.out.Bytes(), rv: pr.rv}, nil
}

// projector writes a projection and notes where its resourceVersion is.
type projector struct {
	out bytes.Buffer
	rv  [2]int
}

// level is where in the object a projector writes: the whole object, its
// metadata, or anywhere else.
type level int

const (
	inside level = iota
	top
	metadata
)

// object writes the members of the object data that n keeps (all of them
// when n is whole). In the whole object (top), metadata is gone through
// member by member, whole or not, to note where its resourceVersion is.
func (pr *projector) object(data []byte, n *node, at level) error {
	pr.out.WriteByte('{')
	first := true
	err := jsonparser.ObjectEach(data, func(key, value []byte, typ jsonparser.ValueType, _ int) error {
		c := n
		if !n.whole {
			c = n.fields[string(key)]
		}
		if c == nil {
			return nil
		}
		if !first {
			pr.out.WriteByte(',')
		}
		first = false
		start := pr.out.Len()
		k, err := json.Marshal(string(key))
		if err != nil {
			return err
		}
		pr.out.Write(k)
		pr.out.WriteByte(':')
		if at == top && string(key) == "metadata" && typ == jsonparser.Object {
			err = pr.object(value, c, metadata)
		} else {
			err = pr.value(value, typ, c)
		}
		if err != nil {
			return err
		}
		if at == metadata && string(key) == "resourceVersion" {
			pr.rv = [2]int{start, pr.out.Len()}
		}
		return nil
	})
	if err != nil {
		return err
	}
	pr.out.WriteByte('}')
	return nil
}

// value writes value as n keeps it: whole, or an object's kept members, or
// each element of a list projected; a scalar is kept whole.
func (pr *projector) value(value []byte, typ jsonparser.ValueType, n *node) error {
	switch {
	case n.whole:
		writeRaw(&pr.out, value, typ)
		return nil
	case typ == jsonparser.Object:
		return pr.object(value, n, inside)
	case typ == jsonparser.Array:
		pr.out.WriteByte('[')
		i := 0
		var perr error
		_, err := jsonparser.ArrayEach(value, func(v []byte, t jsonparser.ValueType, _ int, err error) {
			if perr != nil {
				return
			}
			if err != nil {
				perr = err
				return
			}
			if i > 0 {
				pr.out.WriteByte(',')
			}
			i++
			perr = pr.value(v, t, n)
		})
		if err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		pr.out.WriteByte(']')
		return nil
	default:
		writeRaw(&pr.out, value, typ)
		return nil
	}
}

// writeRaw writes a value jsonparser returned: a string without its quotes,
// anything else as it is.
func writeRaw(out *bytes.Buffer, value []byte, typ jsonparser.ValueType) {
	if typ == jsonparser.String {
		out.WriteByte('"')
		out.Write(value)
		out.WriteByte('"')
		return
	}
	out.Write(value)
}
