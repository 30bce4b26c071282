package object

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
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

// Encoder turns decoded objects into Objects. It is not safe for concurrent
// use; each pipeline owns one.
type Encoder struct {
	// IndexErrors counts index evaluations that failed; the object was
	// cached without a value in that index.
	IndexErrors int64

	names              []string
	funcs              []func(*unstructured.Unstructured) ([]string, error)
	stripManagedFields bool
}

// NewEncoder builds an encoder for the given indexes (the namespace index is
// added first) and transform.
func NewEncoder(specs []IndexSpec, stripManagedFields bool) (*Encoder, error) {
	e := &Encoder{stripManagedFields: stripManagedFields}
	e.names = append(e.names, NamespaceIndex)
	e.funcs = append(e.funcs, func(u *unstructured.Unstructured) ([]string, error) {
		return []string{u.GetNamespace()}, nil
	})
	for _, s := range specs {
		f, err := indexFunc(s)
		if err != nil {
			return nil, err
		}
		e.names = append(e.names, s.Name)
		e.funcs = append(e.funcs, f)
	}
	return e, nil
}

// IndexNames returns the index names in the order of Object.Values.
func (e *Encoder) IndexNames() []string { return e.names }

// Transform applies the configured transform in place. It runs before
// Encode and also on objects the Reflector buffers during a streaming list,
// so the buffer does not hold what will be dropped.
func (e *Encoder) Transform(u *unstructured.Unstructured) {
	if e.stripManagedFields {
		u.SetManagedFields(nil)
	}
}

// Encode transforms u, computes its index values and encodes it once.
func (e *Encoder) Encode(u *unstructured.Unstructured) (*Object, error) {
	e.Transform(u)
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	o := &Object{
		UID:             string(u.GetUID()),
		ResourceVersion: u.GetResourceVersion(),
		JSON:            data,
	}
	o.RV, _ = ParseRV(o.ResourceVersion)
	ns, name := u.GetNamespace(), u.GetName()
	if ns == "" {
		o.Key, o.Name = name, name
	} else {
		o.Key = ns + "/" + name
		o.Namespace, o.Name = o.Key[:len(ns)], o.Key[len(ns)+1:]
	}
	if l := u.GetLabels(); len(l) > 0 {
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o.Labels = make(Labels, 0, 2*len(l))
		for _, k := range keys {
			o.Labels = append(o.Labels, intern(k), intern(l[k]))
		}
	}
	o.Values = make([][]string, len(e.funcs))
	for i, f := range e.funcs {
		vs, err := f(u)
		if err != nil {
			// E.g. {.status.conditions[0].type} on an empty list. The object
			// is still cached; it just has no value in this index.
			e.IndexErrors++
			continue
		}
		for j, v := range vs {
			vs[j] = intern(v)
		}
		o.Values[i] = vs
	}
	return o, nil
}

// intern returns the one copy of s shared by every object that holds the
// same label or index value ("app", "web", a node name): objects of a kind
// repeat them, and each decode would otherwise keep its own copy.
func intern(s string) string { return unique.Make(s).Value() }

func indexFunc(s IndexSpec) (func(*unstructured.Unstructured) ([]string, error), error) {
	if s.Label != "" {
		key := s.Label
		return func(u *unstructured.Unstructured) ([]string, error) {
			if v, ok := u.GetLabels()[key]; ok {
				return []string{v}, nil
			}
			return nil, nil
		}, nil
	}
	// Parse once to reject a bad expression early; evaluate on a fresh
	// parse each time, because client-go's JSONPath changes its parsed
	// template while it runs a {range} and does not restore it.
	if err := jsonpath.New(s.Name).Parse(s.JSONPath); err != nil {
		return nil, fmt.Errorf("index %q: jsonpath %q: %w", s.Name, s.JSONPath, err)
	}
	name, expr := s.Name, s.JSONPath
	return func(u *unstructured.Unstructured) ([]string, error) {
		jp := jsonpath.New(name).AllowMissingKeys(true)
		if err := jp.Parse(expr); err != nil {
			return nil, err
		}
		results, err := jp.FindResults(u.Object)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, rs := range results {
			for _, v := range rs {
				if s, ok := scalar(v); ok {
					out = append(out, s)
				}
			}
		}
		return dedupe(out), nil
	}, nil
}

// scalar renders a JSONPath result as an index value; maps, lists and nulls
// are not values one can select by, so they are skipped.
func scalar(v reflect.Value) (string, bool) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), true
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32, reflect.Uint64:
		return fmt.Sprint(v.Interface()), true
	default:
		return "", false
	}
}

func dedupe(vs []string) []string {
	if len(vs) < 2 {
		return vs
	}
	sort.Strings(vs)
	out := vs[:1]
	for _, v := range vs[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
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
