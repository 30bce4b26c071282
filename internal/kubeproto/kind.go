package kubeproto

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// ErrUnsupported reports a kind without a protobuf encoding: a custom
// resource, a kind client-go does not know, or the internal version.
var ErrUnsupported = errors.New("kubeproto: kind has no protobuf encoding")

// message is what the generated protobuf code gives every built-in type.
type message interface {
	runtime.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
	Reset()
}

// Supports reports whether objects of gvk, a kind kube-apiserver serves in
// protobuf, can be encoded by Message.
func Supports(gvk schema.GroupVersionKind) bool {
	_, err := newMessage(gvk)
	return err == nil
}

// newMessage returns a new, empty typed object of gvk from client-go's scheme.
func newMessage(gvk schema.GroupVersionKind) (message, error) {
	if gvk.Kind == "" || gvk.Version == "" || gvk.Version == runtime.APIVersionInternal {
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, gvk)
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, err)
	}
	m, ok := obj.(message)
	if !ok {
		return nil, fmt.Errorf("%w: %s is %T", ErrUnsupported, gvk, obj)
	}
	return m, nil
}
