package object

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/buger/jsonparser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Raw is an object as the API server sent it: its JSON bytes, with the few
// metadata fields client-go's Reflector reads parsed out. The reflector's
// list and watch decode into Raw instead of unstructured.Unstructured, so
// an object is scanned once rather than decoded into maps and encoded
// again. Labels and annotations are read from the JSON when asked for;
// setters change only the parsed fields, never the JSON.
type Raw struct {
	metav1.TypeMeta
	// ObjectMeta holds Name, Namespace, UID and ResourceVersion only.
	metav1.ObjectMeta
	// JSON is the object's JSON. Raw owns it; Encoder.Transform edits it in
	// place.
	JSON []byte
	// prepared: Encoder.Prepare transformed JSON and copied it into memory
	// of exactly its length, which the encoded Object keeps.
	prepared bool
	// same: PrepareAs found this object cached cold at the same
	// resourceVersion; JSON is nil and Encode shares same's bytes.
	same *Object
}

var (
	_ runtime.Object = (*Raw)(nil)
	_ metav1.Object  = (*Raw)(nil)
)

// rawPaths are the fields ParseRaw reads, in the order parseRaw stores them.
var rawPaths = [][]string{
	{"kind"}, {"apiVersion"},
	{"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "uid"}, {"metadata", "resourceVersion"},
}

// ParseRaw reads the metadata of one object's JSON. It keeps data, which
// the caller must not modify afterwards.
func ParseRaw(data []byte) (*Raw, error) {
	// An object's braces are checked, not its whole syntax: scanning every
	// byte was the largest share of decoding an event, and the bytes are
	// the API server's JSON, passed on as they are.
	if t := bytes.TrimSpace(data); len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		_, typ, _, err := jsonparser.Get(data)
		if err == nil && typ == jsonparser.Object {
			return nil, fmt.Errorf("decode object: bytes after the JSON object: %q", truncate(t, 40))
		}
		return nil, fmt.Errorf("decode object: want a JSON object, got %s", describe(data, typ, err))
	}
	var vals [6]string
	var perr error
	jsonparser.EachKey(data, func(i int, v []byte, typ jsonparser.ValueType, err error) {
		switch {
		case err != nil:
			perr = errors.Join(perr, fmt.Errorf("%s: %w", pathString(rawPaths[i]), err))
		case typ == jsonparser.String:
			s, err := parseString(v)
			if err != nil {
				perr = errors.Join(perr, fmt.Errorf("%s: %w", pathString(rawPaths[i]), err))
			}
			vals[i] = s
		case typ != jsonparser.Null:
			perr = errors.Join(perr, fmt.Errorf("%s is a JSON %s, want a string", pathString(rawPaths[i]), typ))
		}
	}, rawPaths...)
	if perr != nil {
		return nil, fmt.Errorf("decode object %s/%s: %w", vals[3], vals[2], perr)
	}
	r := &Raw{JSON: data}
	r.Kind, r.APIVersion = vals[0], vals[1]
	r.Name, r.Namespace, r.UID, r.ResourceVersion = vals[2], vals[3], types.UID(vals[4]), vals[5]
	return r, nil
}

// GetLabels reads the labels from the JSON; a Raw without JSON (a bookmark
// built by a client) returns those set on it.
func (r *Raw) GetLabels() map[string]string {
	if r.JSON == nil && r.same != nil {
		if b, err := r.same.Bytes(); err == nil {
			return stringMap(b, "metadata", "labels")
		}
	}
	if r.JSON == nil {
		return r.ObjectMeta.GetLabels()
	}
	return stringMap(r.JSON, "metadata", "labels")
}

// GetAnnotations reads the annotations from the JSON; client-go's
// Reflector reads them on bookmarks (k8s.io/initial-events-end). A Raw
// without JSON (a bookmark built by a client, such as pkg/client's)
// returns those set on it.
func (r *Raw) GetAnnotations() map[string]string {
	if r.JSON == nil && r.same != nil {
		if b, err := r.same.Bytes(); err == nil {
			return stringMap(b, "metadata", "annotations")
		}
	}
	if r.JSON == nil {
		return r.ObjectMeta.GetAnnotations()
	}
	return stringMap(r.JSON, "metadata", "annotations")
}

// DeepCopyObject implements runtime.Object.
func (r *Raw) DeepCopyObject() runtime.Object {
	c := &Raw{TypeMeta: r.TypeMeta, JSON: slices.Clone(r.JSON), same: r.same}
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// RawList is a list response: its metadata and items as Raw objects.
type RawList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []Raw
}

var _ metav1.ListInterface = (*RawList)(nil)

// DeepCopyObject implements runtime.Object.
func (l *RawList) DeepCopyObject() runtime.Object {
	c := &RawList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items = append(c.Items, *l.Items[i].DeepCopyObject().(*Raw))
	}
	return c
}

// ParseRawList reads a list response. Items get the list's apiVersion and
// the kind its kind names ("PodList" → "Pod") when they lack their own, as
// the API server sends built-in types' items. Each item is a copy; data is
// not kept.
func ParseRawList(data []byte) (*RawList, error) {
	l := &RawList{}
	var perr error
	paths := [][]string{{"kind"}, {"apiVersion"}, {"metadata", "resourceVersion"}, {"metadata", "continue"}, {"metadata", "remainingItemCount"}}
	var vals [4]string
	jsonparser.EachKey(data, func(i int, v []byte, typ jsonparser.ValueType, err error) {
		if err != nil {
			perr = errors.Join(perr, err)
			return
		}
		if i == 4 {
			if n, err := jsonparser.ParseInt(v); err == nil {
				l.RemainingItemCount = &n
			}
			return
		}
		if typ == jsonparser.String {
			vals[i], err = parseString(v)
			perr = errors.Join(perr, err)
		}
	}, paths...)
	if perr != nil {
		return nil, fmt.Errorf("decode list: %w", perr)
	}
	l.Kind, l.APIVersion, l.ResourceVersion, l.Continue = vals[0], vals[1], vals[2], vals[3]
	itemKind := strings.TrimSuffix(l.Kind, "List")
	_, err := jsonparser.ArrayEach(data, func(v []byte, typ jsonparser.ValueType, _ int, err error) {
		if perr != nil {
			return
		}
		if err != nil || typ != jsonparser.Object {
			perr = fmt.Errorf("decode list: item %d: want a JSON object, got %s", len(l.Items), describe(v, typ, err))
			return
		}
		r, err := ParseRaw(withTypeMeta(v, l.APIVersion, itemKind))
		if err != nil {
			perr = fmt.Errorf("decode list: item %d: %w", len(l.Items), err)
			return
		}
		if r.Kind == "" || r.APIVersion == "" {
			r.Kind, r.APIVersion = itemKind, l.APIVersion
		}
		l.Items = append(l.Items, *r)
	}, "items")
	if err != nil && !errors.Is(err, jsonparser.KeyPathNotFoundError) {
		return nil, fmt.Errorf("decode list: items: %w", err)
	}
	if perr != nil {
		return nil, perr
	}
	return l, nil
}

// withTypeMeta returns a copy of item with apiVersion and kind added at the
// front when it has no kind.
func withTypeMeta(item []byte, apiVersion, kind string) []byte {
	if _, _, _, err := jsonparser.Get(item, "kind"); err == nil || kind == "" {
		return slices.Clone(item)
	}
	head := fmt.Appendf(nil, `{"apiVersion":%q,"kind":%q`, apiVersion, kind)
	body := item[1:] // after '{'
	if t := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n"); !strings.HasPrefix(t, "}") {
		head = append(head, ',')
	}
	return append(head, body...)
}

func stringMap(data []byte, path ...string) map[string]string {
	var m map[string]string
	_ = jsonparser.ObjectEach(data, func(k, v []byte, typ jsonparser.ValueType, _ int) error {
		if typ != jsonparser.String {
			return nil
		}
		key, err1 := parseString(k)
		val, err2 := parseString(v)
		if err1 == nil && err2 == nil {
			if m == nil {
				m = map[string]string{}
			}
			m[key] = val
		}
		return nil
	}, path...)
	return m
}

func pathString(p []string) string { return strings.Join(p, ".") }

// describe names what a JSON value is, for errors.
func describe(v []byte, typ jsonparser.ValueType, err error) string {
	if err != nil {
		return fmt.Sprintf("malformed JSON (%v) starting %q", err, truncate(v, 40))
	}
	return fmt.Sprintf("a JSON %s", typ)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// parseString reads the contents of a JSON string (without its quotes) as
// encoding/json does, which is how the objects were read before informerd
// scanned their bytes: invalid UTF-8 and lone surrogate escapes become
// U+FFFD instead of failing the object, so that names, labels and index
// values are valid UTF-8 (protobuf strings must be) and match the object
// a client decodes from the JSON. The fast path is jsonparser's.
func parseString(v []byte) (string, error) {
	if plainString(v) {
		return string(v), nil
	}
	s, err := jsonparser.ParseString(v)
	if err == nil && utf8.ValidString(s) {
		return s, nil
	}
	quoted := make([]byte, 0, len(v)+2)
	quoted = append(append(append(quoted, '"'), v...), '"')
	if uerr := json.Unmarshal(quoted, &s); uerr != nil {
		return "", fmt.Errorf("invalid JSON string %q: %w", v, uerr)
	}
	return s, nil
}

// plainString reports whether a JSON string's contents need no decoding:
// no escape, valid UTF-8. Most names, labels and index values are.
func plainString(v []byte) bool {
	return bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v)
}

// internString is intern(parseString(v)) without a copy of v for the
// lookup: a value already interned (the same label on another object, the
// same node) costs no allocation.
func internString(v []byte) (string, error) {
	if plainString(v) {
		if len(v) == 0 {
			return "", nil
		}
		// unique.Make copies a string it stores, so the view of v is not
		// kept.
		return intern(unsafe.String(unsafe.SliceData(v), len(v))), nil
	}
	s, err := parseString(v)
	return intern(s), err
}
