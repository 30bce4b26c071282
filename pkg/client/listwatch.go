package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/backoff"
)

// Options choose what a ListWatch lists and watches.
type Options struct {
	// Resource is the informerd resource name ("pods", "deployments.apps",
	// "widgets.v1.example.com"). Empty: the resource whose group, version
	// and kind match the example object, found with ListResources.
	Resource string
	// Namespace narrows to one namespace; empty is all namespaces.
	Namespace string
	// LabelSelector narrows by labels ("app=web,tier!=db"); a label
	// selector in the ListOptions of a call is added to it.
	LabelSelector string
	// Index and IndexValues narrow to objects with any of the values in
	// one of the resource's indexes (see ListResources).
	Index       string
	IndexValues []string
	// Fields are the fields of each object to fetch (a field mask): paths
	// of the object's JSON field names separated by dots
	// ("metadata.labels", "status.podIP", "spec.containers.image"; a name
	// with dots in backquotes, metadata.labels.`app.kubernetes.io/name`).
	// apiVersion, kind and metadata's name, namespace, uid and
	// resourceVersion are always kept. Empty: whole objects.
	//
	// An informer on the ListWatch stores the objects as the mask shows
	// them (a hidden field of a typed object reads as its zero value). A
	// change to hidden fields only never reaches it: no event, no handler
	// call, and the stored object keeps the resourceVersion of its last
	// shown change. A malformed path, or one the resource's schema does
	// not have, fails every List and Watch with 400 BadRequest. See
	// docs/api.md, "Field masks".
	Fields []string
	// SlowConsumerPolicy is passed to every Watch.
	SlowConsumerPolicy pb.SlowConsumerPolicy
	// Scheme decodes typed objects; nil is client-go's kubernetes scheme
	// (every built-in type). Unstructured objects need none.
	Scheme *runtime.Scheme
	// DisableWatchList makes client-go's reflector list and then watch
	// instead of asking for a streaming list (a Watch with
	// send_initial_events), which it does by default.
	DisableWatchList bool
	// Decoder, when set, decodes objects instead of the example object's
	// type (Scheme is then unused), e.g. into a form a cache of bytes
	// keeps. Resource must then be set.
	Decoder Decoder
	// Backoff spaces the ListWatch's retries while informerd refuses its
	// calls as UNAVAILABLE or RESOURCE_EXHAUSTED (the zero value is
	// DefaultBackoff). A List or Watch retries until it succeeds, fails
	// for good or its context ends; a watch whose stream breaks before its
	// first event is opened again, and after a stream broke the next
	// Watch waits first. client-go's Reflector never sees these refusals,
	// so its own backoff, which resets only every 2 minutes, never grows.
	Backoff Backoff
	// NoRetry returns every refusal to the caller at once, as a 429 (the
	// Reflector then backs off and watches again from its
	// resourceVersion), and a stream broken before its first event as a
	// 429 event: for a caller that spaces its retries itself, as informerd's
	// leaves do.
	NoRetry bool
}

// ListWatch lists and watches one resource through informerd: it is a
// client-go cache.ListerWatcher, so an unmodified SharedIndexInformer or
// Reflector runs on informerd instead of the API server. It serves
// client-go's streaming lists (WatchList), lists with a minimum
// resourceVersion and pages, watches that resume from a resourceVersion,
// and bookmarks; an expired resourceVersion is the API server's 410, so
// the reflector lists again. Its methods may be called concurrently.
type ListWatch struct {
	client pb.CacheServiceClient
	opts   Options
	codec  Decoder
	gvk    schema.GroupVersionKind // the example's; empty with a Decoder

	// backoff spaces the retries; nil with Options.NoRetry.
	backoff *backoff.Backoff

	mu       sync.Mutex
	resource string // resolved from the example's kind when opts.Resource is empty
}

var (
	_ cache.ListerWatcher            = (*ListWatch)(nil)
	_ cache.ListerWatcherWithContext = (*ListWatch)(nil)
)

// NewListWatch returns a ListWatch for the objects like example: a pointer
// to a type registered in o.Scheme (&corev1.Pod{}), or an
// *unstructured.Unstructured with apiVersion and kind set. The informer
// built on it must be given the same example.
//
// With Options.Decoder, example may be nil, and Options.Resource must name
// the resource.
func NewListWatch(c pb.CacheServiceClient, example runtime.Object, o Options) (*ListWatch, error) {
	if o.Index != "" && len(o.IndexValues) == 0 {
		return nil, fmt.Errorf("informerd client: index %q needs at least one value", o.Index)
	}
	lw := &ListWatch{client: c, opts: o, codec: o.Decoder, resource: o.Resource}
	if !o.NoRetry {
		lw.backoff = backoff.New(o.Backoff.policy())
	}
	if o.Decoder != nil {
		if o.Resource == "" {
			return nil, errors.New("informerd client: with a Decoder, Options.Resource must name the resource (there is no example object to find it by)")
		}
		return lw, nil
	}
	cd, err := newCodec(example, o.Scheme)
	if err != nil {
		return nil, err
	}
	lw.codec, lw.gvk = cd, cd.gvk
	return lw, nil
}

// IsWatchListSemanticsUnSupported tells client-go's reflector whether to
// use streaming lists: informerd serves them unless Options.DisableWatchList.
func (lw *ListWatch) IsWatchListSemanticsUnSupported() bool { return lw.opts.DisableWatchList }

// List implements cache.Lister.
func (lw *ListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), options)
}

// Watch implements cache.Watcher.
func (lw *ListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), options)
}

// ListWithContext implements cache.ListerWithContext. ResourceVersion in
// options is a minimum ("not older than"), as for the API server; "" and
// "0" mean the cache as it is. With a Limit it returns one page and a
// Continue token; without, every page of one snapshot. Each page is
// retried while informerd is unavailable (Options.Backoff).
func (lw *ListWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	if options.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		return nil, apierrors.NewBadRequest("informerd serves lists at the cache's resourceVersion or newer, not at an exact older one (resourceVersionMatch=Exact)")
	}
	sel, err := lw.selector(options)
	if err != nil {
		return nil, err
	}
	resource, err := lw.resolve(ctx)
	if err != nil {
		return nil, err
	}
	req := &pb.ListRequest{Resource: resource, Selector: sel, Limit: options.Limit, ContinueToken: options.Continue, Fields: lw.fields()}
	if rv := options.ResourceVersion; rv != "" && rv != "0" && options.Continue == "" {
		req.MinResourceVersion = rv
	}
	var items []runtime.Object
	snapshot := "" // the first page's resourceVersion: every page's
	for {
		var resp *pb.ListResponse
		err := lw.retry(ctx, "List", func() (err error) {
			resp, err = lw.client.List(ctx, req)
			return err
		})
		if err != nil {
			return nil, FromError(err)
		}
		if snapshot == "" {
			snapshot = resp.GetResourceVersion()
		}
		for _, o := range resp.GetObjects() {
			obj, err := lw.codec.Decode(o.GetJson())
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			items = append(items, obj)
		}
		if resp.GetContinueToken() == "" || options.Limit > 0 {
			return lw.codec.List(items, snapshot, resp.GetContinueToken())
		}
		req.ContinueToken, req.MinResourceVersion = resp.GetContinueToken(), ""
	}
}

// WatchWithContext implements cache.WatcherWithContext. It returns once
// informerd has admitted the watch, or with the error that refused it: a
// resourceVersion older than informerd's history is 410 Expired; while
// informerd is unavailable it retries (Options.Backoff). The watch ends
// (its channel closes) when TimeoutSeconds pass, when informerd ends the
// stream for being slow or shutting down, or when the connection breaks;
// the reflector then watches again from the last resourceVersion it saw,
// and this call first waits out the backoff the break drew. A stream that
// breaks before its first event is opened again (with Options.NoRetry it
// sends a 429 first, so that the reflector backs off and watches again
// rather than take it for a failed watch and list). A stream that ends
// with an error sends it as a watch.Error event first.
func (lw *ListWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	sel, err := lw.selector(options)
	if err != nil {
		return nil, err
	}
	resource, err := lw.resolve(ctx)
	if err != nil {
		return nil, err
	}
	req := &pb.WatchRequest{
		Resource:           resource,
		Selector:           sel,
		AllowBookmarks:     options.AllowWatchBookmarks,
		SlowConsumerPolicy: lw.opts.SlowConsumerPolicy,
		Fields:             lw.fields(),
	}
	// As the API server: sendInitialEvents asks for the current objects
	// then a bookmark marking their end; a watch from "" or "0" without it
	// starts with the current objects too (as ADDED), and one from a
	// resourceVersion carries the changes after it.
	initialEndBookmark := options.SendInitialEvents != nil && *options.SendInitialEvents
	rv := options.ResourceVersion
	switch {
	case initialEndBookmark:
		req.SendInitialEvents = true
		if rv != "0" {
			req.ResourceVersion = rv // a minimum: informerd waits for it
		}
	case rv == "" || rv == "0":
		req.SendInitialEvents = options.SendInitialEvents == nil
	default:
		req.ResourceVersion = rv
	}
	o := watchOptions{
		timeoutSeconds:     options.TimeoutSeconds,
		initialEndBookmark: initialEndBookmark,
		allowBookmarks:     options.AllowWatchBookmarks,
		backoff:            lw.backoff,
	}
	var w watch.Interface
	err = lw.retry(ctx, "Watch", func() (err error) {
		w, err = startWatch(ctx, lw.client, req, lw.codec, o)
		return err
	})
	return w, err
}

// selector combines the Options with a call's ListOptions.
func (lw *ListWatch) selector(options metav1.ListOptions) (*pb.Selector, error) {
	sel := &pb.Selector{Namespace: lw.opts.Namespace}
	labels := make([]string, 0, 2)
	for _, s := range []string{lw.opts.LabelSelector, options.LabelSelector} {
		if s != "" {
			labels = append(labels, s)
		}
	}
	sel.LabelSelector = strings.Join(labels, ",")
	if lw.opts.Index != "" {
		sel.Index = &pb.IndexSelector{Name: lw.opts.Index, Values: slices.Clone(lw.opts.IndexValues)}
	}
	if options.FieldSelector == "" {
		return sel, nil
	}
	// informerd selects by namespace, labels and indexes; of field
	// selectors only the namespace has a meaning there.
	fs, err := fields.ParseSelector(options.FieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: %v", options.FieldSelector, err))
	}
	for _, r := range fs.Requirements() {
		if r.Field != "metadata.namespace" || (r.Operator != "=" && r.Operator != "==") {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("informerd does not serve field selector %q: select by namespace, labels or an index (Options.Index) instead", options.FieldSelector))
		}
		if sel.Namespace != "" && sel.Namespace != r.Value {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %q contradicts namespace %q", options.FieldSelector, sel.Namespace))
		}
		sel.Namespace = r.Value
	}
	return sel, nil
}

// fields is the field mask of one request: nil for whole objects, a new
// message otherwise, as one request's message is not shared with another's.
func (lw *ListWatch) fields() *fieldmaskpb.FieldMask {
	if len(lw.opts.Fields) == 0 {
		return nil
	}
	return &fieldmaskpb.FieldMask{Paths: slices.Clone(lw.opts.Fields)}
}

// resolve returns the resource name, finding it by the example's kind the
// first time when Options.Resource is empty.
func (lw *ListWatch) resolve(ctx context.Context) (string, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.resource != "" {
		return lw.resource, nil
	}
	resp, err := lw.client.ListResources(ctx, &pb.ListResourcesRequest{})
	if err != nil {
		return "", FromError(err)
	}
	gvk := lw.gvk
	var served, unresolved []string
	for _, r := range resp.GetResources() {
		if r.GetGroup() == gvk.Group && r.GetVersion() == gvk.Version && r.GetKind() == gvk.Kind {
			lw.resource = r.GetName()
			return lw.resource, nil
		}
		served = append(served, r.GetName())
		if r.GetKind() == "" {
			unresolved = append(unresolved, r.GetName())
		}
	}
	kind := gvk.GroupVersion().String() + " " + gvk.Kind
	if len(unresolved) > 0 {
		// A resource informerd has not resolved yet (just started, or a
		// CRD not installed) may be this kind: retry, as while not synced.
		return "", apierrors.NewTooManyRequests(fmt.Sprintf("informerd serves no resource of kind %s yet; not resolved yet: %s", kind, strings.Join(unresolved, ", ")), 1)
	}
	return "", &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("informerd serves no resource of kind %s; served: %s", kind, strings.Join(served, ", ")),
	}}
}
