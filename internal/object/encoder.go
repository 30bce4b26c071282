package object

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"unique"

	"github.com/buger/jsonparser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NamespaceIndex is the index every resource has; it is always index 0.
const NamespaceIndex = "namespace"

// IndexSpec says how to compute one index: from a label's value or from a
// JSONPath expression, which may yield several values.
type IndexSpec struct {
	Name     string
	Label    string
	JSONPath string
}

// Encoder turns the API server's objects into Objects. Its methods may be
// called concurrently, each call with a Raw of its own (Encode and
// Transform edit the Raw they are given); each pipeline owns one.
type Encoder struct {
	names              []string
	funcs              []func(*Raw, Labels) ([]string, error)
	indexErrors        []atomic.Int64 // per index, in the order of names
	stripManagedFields bool
}

// IndexError is an index expression that failed on an object, e.g.
// {.status.conditions[0].type} on an empty list: the object is cached
// without a value in that index.
type IndexError struct {
	Index string
	Err   error
}

func (e IndexError) Error() string { return fmt.Sprintf("index %q: %v", e.Index, e.Err) }

func (e IndexError) Unwrap() error { return e.Err }

// NewEncoder builds an encoder for the given indexes (the namespace index is
// added first) and transform.
func NewEncoder(specs []IndexSpec, stripManagedFields bool) (*Encoder, error) {
	e := &Encoder{stripManagedFields: stripManagedFields}
	e.names = append(e.names, NamespaceIndex)
	e.funcs = append(e.funcs, func(r *Raw, _ Labels) ([]string, error) {
		return []string{r.Namespace}, nil
	})
	for _, s := range specs {
		f, err := indexFunc(s)
		if err != nil {
			return nil, err
		}
		e.names = append(e.names, s.Name)
		e.funcs = append(e.funcs, f)
	}
	e.indexErrors = make([]atomic.Int64, len(e.funcs))
	return e, nil
}

// IndexNames returns the index names in the order of Object.Values.
func (e *Encoder) IndexNames() []string { return e.names }

// IndexErrors returns, in the order of IndexNames, how many evaluations of
// each index failed since the encoder was built: every Encode counts, so
// an object that keeps failing counts at each of its events and relists.
func (e *Encoder) IndexErrors() []int64 {
	out := make([]int64, len(e.indexErrors))
	for i := range e.indexErrors {
		out[i] = e.indexErrors[i].Load()
	}
	return out
}

// Transform applies the configured transform to r's JSON in place. It runs
// in Encode and also on objects the Reflector buffers during a streaming
// list, so the buffer does not hold what will be dropped. It may run more
// than once on the same object.
func (e *Encoder) Transform(r *Raw) {
	if r.prepared {
		return
	}
	if e.stripManagedFields {
		if out, found := jsonparser.DeleteFound(r.JSON, "metadata", "managedFields"); found {
			r.JSON = out
		}
	}
}

// Prepare readies r, whose JSON is borrowed (the caller's read buffer,
// valid until its next read), for Encode: it applies the transform in
// place and copies the result into memory of r's own, of exactly its
// length, which Encode then keeps without another copy. The API server's
// bytes are copied once, and what is dropped is never copied.
func (e *Encoder) Prepare(r *Raw) {
	data := r.JSON
	start, end, cut := 0, 0, false
	if e.stripManagedFields && !r.prepared {
		start, end, cut = managedFieldsSpan(data)
	}
	if !cut {
		start, end = len(data), len(data)
	}
	// The bytes before and after the cut, copied once.
	own := make([]byte, len(data)-(end-start))
	copy(own[copy(own, data[:start]):], data[end:])
	r.JSON, r.prepared = own, true
}

// PrepareAs readies r as Prepare does, taking the JSON of cached, the
// same object at the same resourceVersion already encoded (as a relist
// brings the objects that did not change): nothing is copied, and the
// Object Encode returns shares cached's bytes, so a relist does not hold a
// second copy of the cache. A cold cached object's bytes are shared
// compressed: r holds no JSON until Encode decompresses them for the
// index values, one object at a time, and drops them.
func PrepareAs(r *Raw, cached *Object) {
	if cached.dict != nil {
		r.JSON, r.same, r.prepared = nil, cached, true
		return
	}
	r.JSON, r.prepared = cached.data, true
}

// EncodeUnstructured encodes an unstructured object, as Encode would the
// same object from the API server.
func (e *Encoder) EncodeUnstructured(u *unstructured.Unstructured) (*Object, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	r, err := ParseRaw(data)
	if err != nil {
		return nil, err
	}
	return e.Encode(r)
}

// Encode transforms r, computes its index values and encodes it once. The
// Object keeps none of r's memory, except the JSON of a prepared r
// (Prepare). An index that fails on r is counted
// (IndexErrors) and left without a value; EncodeWithIndexErrors also says
// which.
func (e *Encoder) Encode(r *Raw) (*Object, error) {
	o, _, err := e.EncodeWithIndexErrors(r)
	return o, err
}

// EncodeWithIndexErrors is Encode, also returning the indexes that failed
// on r (nil when none did).
func (e *Encoder) EncodeWithIndexErrors(r *Raw) (*Object, []IndexError, error) {
	if same := r.same; same != nil {
		// Prepared as a cold cached object: its JSON, for the labels and
		// index values, then its compressed bytes for the Object.
		json, err := same.Bytes()
		if err != nil {
			return nil, nil, fmt.Errorf("encode %s/%s: %w", r.Namespace, r.Name, err)
		}
		o, failed, err := e.EncodeWithIndexErrors(&Raw{TypeMeta: r.TypeMeta, ObjectMeta: r.ObjectMeta, JSON: json, prepared: true})
		if err != nil {
			return nil, nil, err
		}
		o.data, o.dict, o.rawLen = same.data, same.dict, same.rawLen
		return o, failed, nil
	}
	e.Transform(r)
	labels, err := parseLabels(r.JSON)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s/%s: %w", r.Namespace, r.Name, err)
	}
	ns, name := r.Namespace, r.Name
	// A copy of its own length: r.JSON may have room left by the transform.
	json := r.JSON
	if !r.prepared {
		json = slices.Clone(r.JSON)
	}
	o := &Object{data: json, UID: string(r.UID), ResourceVersion: r.ResourceVersion, Labels: labels}
	o.RV, _ = ParseRV(o.ResourceVersion)
	if ns == "" {
		o.Key, o.Name = name, name
	} else {
		o.Key = ns + "/" + name
		o.Namespace, o.Name = o.Key[:len(ns)], o.Key[len(ns)+1:]
	}
	o.Values = make([][]string, len(e.funcs))
	var failed []IndexError
	for i, f := range e.funcs {
		vs, err := f(r, labels)
		if err != nil {
			// The object is still cached; it just has no value in this
			// index.
			e.indexErrors[i].Add(1)
			failed = append(failed, IndexError{Index: e.names[i], Err: err})
			continue
		}
		for j, v := range vs {
			vs[j] = intern(v)
		}
		o.Values[i] = vs
	}
	return o, failed, nil
}

// parseLabels reads metadata.labels, sorted by key and interned.
func parseLabels(data []byte) (Labels, error) {
	l := make(Labels, 0, 16)
	err := jsonparser.ObjectEach(data, func(k, v []byte, typ jsonparser.ValueType, _ int) error {
		if typ != jsonparser.String {
			return fmt.Errorf("label %q is a JSON %s, want a string", k, typ)
		}
		key, err := internString(k)
		if err != nil {
			return err
		}
		val, err := internString(v)
		if err != nil {
			return err
		}
		l = append(l, key, val)
		return nil
	}, "metadata", "labels")
	if errors.Is(err, jsonparser.KeyPathNotFoundError) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata.labels: %w", err)
	}
	sort.Sort(byKey(l))
	// Cached for the object's life: no spare capacity from appending.
	if len(l) == 0 {
		return nil, nil
	}
	return slices.Clip(slices.Clone(l)), nil
}

// byKey sorts a Labels by key, moving each value with its key.
type byKey Labels

func (l byKey) Len() int           { return len(l) / 2 }
func (l byKey) Less(i, j int) bool { return l[2*i] < l[2*j] }
func (l byKey) Swap(i, j int) {
	l[2*i], l[2*j] = l[2*j], l[2*i]
	l[2*i+1], l[2*j+1] = l[2*j+1], l[2*i+1]
}

// intern returns the one copy of s shared by every object that holds the
// same label or index value ("app", "web", a node name): objects of a kind
// repeat them, and each decode would otherwise keep its own copy.
func intern(s string) string { return unique.Make(s).Value() }

func indexFunc(s IndexSpec) (func(*Raw, Labels) ([]string, error), error) {
	if s.Label != "" {
		key := s.Label
		return func(_ *Raw, l Labels) ([]string, error) {
			if v, ok := l.Lookup(key); ok {
				return []string{v}, nil
			}
			return nil, nil
		}, nil
	}
	ix, err := newPathIndex(s.Name, s.JSONPath)
	if err != nil {
		return nil, err
	}
	return func(r *Raw, _ Labels) ([]string, error) { return ix.values(r.JSON) }, nil
}

// KeyOf returns the cache key of a namespace and name.
func KeyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey is the inverse of KeyOf.
func SplitKey(key string) (namespace, name string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}
