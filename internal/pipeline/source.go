package pipeline

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
)

// Source is where a Set's pipelines take their objects from: the API
// server, or an upstream informerd (internal/upstream). Its methods may be
// called concurrently.
type Source interface {
	// Resolve finds the resource a configured name names. A
	// *NotServedError says the source does not serve it (yet); any error
	// is retried with backoff.
	Resolve(ctx context.Context, name string) (Resolved, error)
	// Reset forgets what Resolve learnt, so that a resource served
	// meanwhile is found.
	Reset()
	// ListWatch lists and watches r's objects of res, readying each object
	// with prepare while its bytes are valid. client is what client-go's
	// Reflector asks whether streaming lists are supported.
	ListWatch(res Resolved, r config.Resource, prepare func(*object.Raw)) (lw *cache.ListWatch, client any)
}

// NotServedError: the source does not serve a configured resource (yet).
type NotServedError struct{ Msg string }

func (e *NotServedError) Error() string { return e.Msg }

// apiServer is the API server as a Source.
type apiServer struct {
	client *reflector.Client
	mapper Mapper
	meta   metadata.Interface // for the integrity checks' lists
}

func (a apiServer) Resolve(_ context.Context, name string) (Resolved, error) {
	res, err := Resolve(a.mapper, name)
	if meta.IsNoMatchError(err) {
		return res, &NotServedError{Msg: fmt.Sprintf("the API server does not serve %q yet (is its CRD installed?); retrying", name)}
	}
	return res, err
}

func (a apiServer) Reset() { a.mapper.Reset() }

func (a apiServer) ListWatch(res Resolved, r config.Resource, prepare func(*object.Raw)) (*cache.ListWatch, any) {
	ns := ""
	if res.Namespaced {
		ns = r.Namespace
	}
	return a.client.ListWatch(res.GVR, ns, selectors(r), prepare), a.client
}

// selectors sets r's label and field selectors on the API server's list
// and watch options.
func selectors(r config.Resource) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.LabelSelector = r.LabelSelector
		o.FieldSelector = r.FieldSelector
	}
}

func isNotServed(err error) bool {
	var ns *NotServedError
	return errors.As(err, &ns)
}
