package client

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

// Decoder turns the JSON of informerd's objects into runtime.Objects. The
// default decodes into the example object's type; another Decoder lets a
// program keep objects in a form of its own, as a leaf informerd keeps
// the upstream's bytes (Options.Decoder). Its methods may be called
// concurrently.
type Decoder interface {
	// New returns an empty object, which a bookmark's resourceVersion and
	// annotations are set on through meta.Accessor.
	New() runtime.Object
	// Decode decodes one object's JSON; data is not used after it returns
	// unless the object keeps it (it is the caller's, never reused).
	Decode(data []byte) (runtime.Object, error)
	// List returns a list object holding items at resourceVersion rv, with
	// the continue token cont.
	List(items []runtime.Object, rv, cont string) (runtime.Object, error)
}

// codec turns the JSON of informerd's objects into runtime.Objects of one
// Go type: a type registered in a scheme (*corev1.Pod) or
// *unstructured.Unstructured. It is safe for concurrent use.
type codec struct {
	gvk          schema.GroupVersionKind
	typ          reflect.Type // the pointer type of the objects
	unstructured bool
	scheme       *runtime.Scheme
	decoder      runtime.Decoder
}

// newCodec returns the codec for objects like example. An unstructured
// example must carry its apiVersion and kind.
func newCodec(example runtime.Object, s *runtime.Scheme) (*codec, error) {
	if example == nil {
		return nil, fmt.Errorf("informerd client: no example object: give e.g. &corev1.Pod{} or an *unstructured.Unstructured with apiVersion and kind")
	}
	if s == nil {
		s = scheme.Scheme
	}
	c := &codec{typ: reflect.TypeOf(example), scheme: s}
	if u, ok := example.(*unstructured.Unstructured); ok {
		c.gvk, c.unstructured = u.GroupVersionKind(), true
		if c.gvk.Kind == "" || c.gvk.Version == "" {
			return nil, fmt.Errorf("informerd client: the unstructured example object needs apiVersion and kind (SetGroupVersionKind)")
		}
		return c, nil
	}
	if c.typ.Kind() != reflect.Pointer || c.typ.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("informerd client: the example object must be a pointer to a struct, not %s", c.typ)
	}
	gvks, _, err := s.ObjectKinds(example)
	if err != nil {
		return nil, fmt.Errorf("informerd client: %s is not registered in the scheme: %w", c.typ, err)
	}
	c.gvk = gvks[0]
	c.decoder = serializer.NewCodecFactory(s).UniversalDeserializer()
	return c, nil
}

var _ Decoder = (*codec)(nil)

// New returns an empty object of the codec's type, with apiVersion and kind
// set when unstructured (client-go's reflector checks them).
func (c *codec) New() runtime.Object {
	if c.unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(c.gvk)
		return u
	}
	return reflect.New(c.typ.Elem()).Interface().(runtime.Object)
}

// Decode decodes one object's JSON.
func (c *codec) Decode(data []byte) (runtime.Object, error) {
	if c.unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("informerd client: decode %s: %w", c.gvk.Kind, err)
		}
		if got := u.GroupVersionKind(); got != c.gvk {
			return nil, fmt.Errorf("informerd client: got a %s, want a %s: does the resource match the example object?", got, c.gvk)
		}
		return u, nil
	}
	into := c.New()
	obj, gvk, err := c.decoder.Decode(data, nil, into)
	if err != nil {
		return nil, fmt.Errorf("informerd client: decode %s: %w", c.gvk.Kind, err)
	}
	if reflect.TypeOf(obj) != c.typ {
		return nil, fmt.Errorf("informerd client: got a %s, want a %s: does the resource match the example object?", gvk, c.gvk)
	}
	return obj, nil
}

// List returns a list object of the codec's type holding items, at rv.
func (c *codec) List(items []runtime.Object, rv, cont string) (runtime.Object, error) {
	var list runtime.Object
	if c.unstructured {
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(c.gvk.GroupVersion().WithKind(c.gvk.Kind + "List"))
		list = ul
	} else if l, err := c.scheme.New(c.gvk.GroupVersion().WithKind(c.gvk.Kind + "List")); err == nil {
		list = l
	} else {
		list = &metav1.List{}
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, fmt.Errorf("informerd client: build %s list: %w", c.gvk.Kind, err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("informerd client: build %s list: %w", c.gvk.Kind, err)
	}
	lm.SetResourceVersion(rv)
	lm.SetContinue(cont)
	return list, nil
}
