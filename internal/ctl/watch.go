package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// runWatch prints the selected objects (unless --watch-only or
// --resource-version), then every change after them. A NAME narrows both
// to the objects of that name.
func (f *getFlags) runWatch(ctx context.Context, o *options, c pb.CacheServiceClient, resource, name string, sel *pb.Selector) error {
	from := f.rv
	var current []*pb.Object
	if from == "" {
		objs, rv, err := f.list(ctx, o, c, resource, sel, f.watchOnly)
		if err != nil {
			return err
		}
		from = rv
		if !f.watchOnly {
			current = named(objs, name)
			if name != "" && len(current) == 0 {
				return fmt.Errorf("not found: %s %q%s (at resourceVersion %s)", resource, name, where(sel.GetNamespace()), rv)
			}
		}
	}
	lw, err := f.listWatch(ctx, o, c, resource, sel)
	if err != nil {
		return err
	}
	p := eventPrinter{w: o.out, format: f.format, resource: resource}
	p.header()
	printed := 0
	// emit prints one event and says whether --max-events are printed.
	emit := func(typ, rv string, obj *pb.Object) (bool, error) {
		if err := p.print(typ, rv, obj); err != nil {
			return true, err
		}
		printed++
		return f.maxEvents > 0 && printed >= f.maxEvents, nil
	}
	for _, obj := range current {
		if done, err := emit(string(watch.Added), obj.GetResourceVersion(), obj); done {
			return err
		}
	}
	return watchFrom(ctx, o, lw, from, func(typ watch.EventType, u *unstructured.Unstructured) (bool, error) {
		if name != "" && u.GetName() != name {
			return false, nil
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return true, err
		}
		obj := &pb.Object{Namespace: u.GetNamespace(), Name: u.GetName(), Uid: string(u.GetUID()), ResourceVersion: u.GetResourceVersion(), Json: b}
		return emit(string(typ), u.GetResourceVersion(), obj)
	})
}

// listWatch returns a pkg/client ListWatch of what informerd serves as
// resource, selecting what sel does. It decodes the objects as
// unstructured, of the kind ListResources names.
func (f *getFlags) listWatch(ctx context.Context, o *options, c pb.CacheServiceClient, resource string, sel *pb.Selector) (*client.ListWatch, error) {
	info, err := servedAs(ctx, o, c, resource)
	if err != nil {
		return nil, err
	}
	opts := clientOptions(info.GetName(), sel)
	opts.Fields = f.fields
	if f.coalesce {
		opts.SlowConsumerPolicy = pb.SlowConsumerPolicy_SLOW_CONSUMER_POLICY_COALESCE
	}
	example := &unstructured.Unstructured{}
	example.SetGroupVersionKind(schema.GroupVersionKind{Group: info.GetGroup(), Version: info.GetVersion(), Kind: info.GetKind()})
	return client.NewListWatch(c, example, opts)
}

// named returns the objects called name, or all when name is "".
func named(objs []*pb.Object, name string) []*pb.Object {
	if name == "" {
		return objs
	}
	var out []*pb.Object
	for _, o := range objs {
		if o.GetName() == name {
			out = append(out, o)
		}
	}
	return out
}

func where(namespace string) string {
	if namespace == "" {
		return ""
	}
	return " in namespace " + namespace
}

// watchFrom watches through lw from the resourceVersion from, and hands
// each event to handle until handle says it is done, ctx ends (then it
// returns nil), or the watch fails in a way watching again cannot cure.
// client-go's RetryWatcher watches again from the last resourceVersion
// when a stream breaks.
func watchFrom(ctx context.Context, o *options, lw *client.ListWatch, from string, handle func(watch.EventType, *unstructured.Unstructured) (bool, error)) error {
	// RetryWatcher logs every failed attempt; resumer says on stderr
	// what a person needs to know instead.
	wctx, stop := context.WithCancelCause(klog.NewContext(ctx, klog.Logger{}))
	defer stop(nil)
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, from, &resumer{lw: lw, stop: stop, errOut: o.errOut, addr: o.conn.Address})
	if err != nil {
		return err
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	for ev := range rw.ResultChan() {
		if ev.Type == watch.Error {
			if cause := context.Cause(wctx); cause != nil {
				return explain(cause, o.conn.Address)
			}
			return eventError(ev.Object)
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("a watch event carries a %T, not an object", ev.Object)
		}
		if done, err := handle(ev.Type, u); done {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if cause := context.Cause(wctx); cause != nil {
		return explain(cause, o.conn.Address)
	}
	return errors.New("the watch ended")
}

// eventError explains the status of an error event: RetryWatcher hands on
// a 410 Expired (the resourceVersion it resumes from left informerd's
// history) and ends.
func eventError(obj any) error {
	var err error = fmt.Errorf("unexpected watch event %v", obj)
	if st, ok := obj.(*metav1.Status); ok {
		err = &apierrors.StatusError{ErrStatus: *st}
	}
	if apierrors.IsResourceExpired(err) {
		return tooOld(err.Error())
	}
	return err
}

// resumer is the Watcher a RetryWatcher watches through. RetryWatcher
// watches again after any failure; resumer stops it, with the error as its
// context's cause, on one that watching again cannot cure: any before a
// first stream was admitted, and after that any but informerd being
// unavailable or refusing for now. It says on stderr when a broken watch
// is watched again. Only the RetryWatcher's goroutine calls it.
type resumer struct {
	lw     *client.ListWatch
	stop   context.CancelCauseFunc
	errOut io.Writer
	addr   string

	admitted bool // a stream was admitted once
	failing  bool // the last attempt failed
}

var _ toolscache.WatcherWithContext = (*resumer)(nil)

// WatchWithContext implements cache.WatcherWithContext.
func (r *resumer) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if r.admitted && !r.failing {
		fmt.Fprintf(r.errOut, "informerctl: the watch broke; watching again from resourceVersion %s\n", opts.ResourceVersion)
	}
	w, err := r.lw.WatchWithContext(ctx, opts)
	switch {
	case err == nil:
		r.admitted, r.failing = true, false
	case r.admitted && resumable(err):
		r.failing = true
		fmt.Fprintf(r.errOut, "informerctl: %v; trying again from resourceVersion %s\n", explain(err, r.addr), opts.ResourceVersion)
	default:
		r.stop(err)
	}
	return w, err
}

// resumable says whether a watch refused after an earlier one was
// admitted is tried again: informerd shutting down, unreachable, not
// caught up or refusing for a limit.
func resumable(err error) bool {
	var e *client.Error
	if !errors.As(client.FromError(err), &e) {
		return false
	}
	return e.Code == codes.Unavailable || e.Reason == pb.ErrorReason_LIMIT_EXCEEDED || e.Reason == pb.ErrorReason_SLOW_CONSUMER
}
