package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/backoff"
)

// watchOptions say how informerd's events become watch.Events.
type watchOptions struct {
	// timeoutSeconds ends the watch cleanly, as the API server ends a
	// watch after its timeout.
	timeoutSeconds *int64
	// initialEndBookmark: the caller asked for sendInitialEvents, so
	// INITIAL_EVENTS_END is a bookmark annotated k8s.io/initial-events-end.
	initialEndBookmark bool
	allowBookmarks     bool
	// backoff spaces the openings of a stream broken before its first
	// event; nil: such a stream sends a 429 instead (Options.NoRetry).
	backoff *backoff.Backoff
}

// streamWatch is a watch.Interface over one informerd Watch stream. The
// goroutine startWatch starts receives from the stream and sends on result
// until the stream ends or Stop is called, then closes result. Stop may be
// called concurrently and more than once; it returns once that goroutine
// has exited.
type streamWatch struct {
	stream pb.CacheService_WatchClient
	// client and req open the stream again: req is the request whose
	// stream delivered nothing yet, the original one or, after the end of
	// the initial events, a watch from their resourceVersion.
	client pb.CacheServiceClient
	req    *pb.WatchRequest
	codec  Decoder
	opts   watchOptions
	result chan watch.Event
	cancel context.CancelFunc
	done   chan struct{}
	// delivered: an event went out on result since the watch began, or
	// since the end of its initial events, where client-go starts counting
	// again. Only receive's goroutine uses it.
	delivered bool
}

var _ watch.Interface = (*streamWatch)(nil)

// startWatch starts req and returns once informerd has admitted it (it
// sends response headers at once) or with the error that refused it.
func startWatch(ctx context.Context, c pb.CacheServiceClient, req *pb.WatchRequest, cd Decoder, o watchOptions) (watch.Interface, error) {
	sctx, cancel := watchContext(ctx, o)
	stream, err := openStream(sctx, c, req)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &streamWatch{stream: stream, client: c, req: req, codec: cd, opts: o, result: make(chan watch.Event), cancel: cancel, done: make(chan struct{})}
	go w.receive(sctx)
	return w, nil
}

// openStream starts req and returns its stream once informerd has
// admitted it (it sends response headers at once), or the error that
// refused it.
func openStream(ctx context.Context, c pb.CacheServiceClient, req *pb.WatchRequest) (pb.CacheService_WatchClient, error) {
	stream, err := c.Watch(ctx, req)
	if err != nil {
		return nil, FromError(err)
	}
	// No headers means informerd refused the watch: the status follows.
	if md, err := stream.Header(); err != nil || md == nil {
		if err == nil {
			_, err = stream.Recv()
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("informerd ended the watch before admitting it")
		}
		return nil, toAPIError(err)
	}
	return stream, nil
}

// watchContext is the stream's context: ctx, with the watch's timeout when
// one is set. Its one cancel func ends the stream and releases the context.
func watchContext(ctx context.Context, o watchOptions) (context.Context, context.CancelFunc) {
	if o.timeoutSeconds != nil && *o.timeoutSeconds > 0 {
		return context.WithTimeout(ctx, time.Duration(*o.timeoutSeconds)*time.Second)
	}
	return context.WithCancel(ctx)
}

// toAPIError returns FromError's *Error, or an API status error for an
// error that has no gRPC status.
func toAPIError(err error) error {
	err = FromError(err)
	var e *Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// Stop implements watch.Interface.
func (w *streamWatch) Stop() {
	w.cancel()
	<-w.done
}

// ResultChan implements watch.Interface.
func (w *streamWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *streamWatch) receive(ctx context.Context) {
	defer close(w.done)
	defer close(w.result)
	for {
		resp, err := w.stream.Recv()
		if err != nil {
			if err = w.reopen(ctx, err); err == nil {
				continue
			}
			w.end(ctx, err)
			return
		}
		ev, ok, err := w.event(resp)
		if err != nil {
			w.send(ctx, errorEvent(apierrors.NewInternalError(err).ErrStatus))
			return
		}
		if ok && !w.send(ctx, ev) {
			return
		}
		if ok && w.opts.initialEndBookmark && resp.GetType() == pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END {
			// The reflector's streaming list ends here and its watch
			// begins: a watch of its own, whose events it counts anew,
			// and which a broken stream resumes from here.
			w.delivered = false
			w.req = watchFrom(w.req, resp.GetResourceVersion())
		}
	}
}

// watchFrom is req as a watch of the changes after rv.
func watchFrom(req *pb.WatchRequest, rv string) *pb.WatchRequest {
	return &pb.WatchRequest{
		Resource: req.GetResource(), Selector: req.GetSelector(), ResourceVersion: rv,
		AllowBookmarks: req.GetAllowBookmarks(), SlowConsumerPolicy: req.GetSlowConsumerPolicy(), Fields: req.GetFields(),
	}
}

// reopen opens the watch again when its stream broke (err, UNAVAILABLE)
// before delivering anything since it began: the same request is then the
// same watch, and the reflector sees nothing of the break. It waits what
// the backoff draws before each attempt, and retries while informerd is
// unavailable. It returns nil once a new stream is admitted, err when the
// stream is not one to open again, or what ended the attempts: the
// context's end, or a refusal for good (OUT_OF_RANGE, on a replica whose
// history does not reach the resourceVersion), which end then passes on.
func (w *streamWatch) reopen(ctx context.Context, err error) error {
	if w.opts.backoff == nil || ctx.Err() != nil || status.Code(err) != codes.Unavailable {
		return err
	}
	if w.delivered {
		// The reflector watches again from its last resourceVersion;
		// that Watch waits out what this break draws.
		w.opts.backoff.Failed()
		return err
	}
	for {
		d := w.opts.backoff.Failed()
		logRetry(ctx, w.opts.backoff, "informerd ended the watch before its first event; opening it again", "resource", w.req.GetResource(), "err", err, "after", d)
		if werr := w.opts.backoff.Wait(ctx); werr != nil {
			return werr
		}
		stream, oerr := openStream(ctx, w.client, w.req)
		if oerr == nil {
			w.opts.backoff.Healthy()
			w.stream = stream
			return nil
		}
		if !retriable(oerr) || ctx.Err() != nil {
			return oerr
		}
		err = oerr
	}
}

func (w *streamWatch) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		w.delivered = true
		return true
	case <-ctx.Done():
		return false
	}
}

// end decides how the watch ends. A stream informerd ended for being slow
// or for shutting down, a broken connection, and a timeout close the
// channel without an error: the reflector watches again from its last
// resourceVersion. Anything else is sent as a watch.Error first: 410
// Expired makes the reflector list again.
//
// One exception: a stream that ends for being slow, for shutting down or
// for a broken connection before it delivered any event sends its 429
// first (with retries on, reopen has opened such a stream again instead,
// unless it ended for being slow). client-go's reflector takes a watch that closes within a second
// without an event for a broken one and lists again (VeryShortWatchError);
// a replica that dies just after admitting the watch is no reason to list,
// and on a 429 the reflector backs off and watches again from its
// resourceVersion (on another replica, when Config.Address names several).
func (w *streamWatch) end(ctx context.Context, err error) {
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return
	}
	err = FromError(err)
	var e *Error
	if !errors.As(err, &e) {
		w.send(ctx, errorEvent(apierrors.NewInternalError(err).ErrStatus))
		return
	}
	if e.Code == codes.Unavailable || (e.Code == codes.ResourceExhausted && e.Reason == pb.ErrorReason_SLOW_CONSUMER) {
		klog.FromContext(ctx).V(2).Info("informerd ended the watch; it resumes from the last resourceVersion",
			"code", e.Code.String(), "reason", e.Reason, "lastResourceVersion", e.LastResourceVersion(), "message", e.Message, "delivered", w.delivered)
		if !w.delivered {
			w.send(ctx, errorEvent(e.Status())) // 429: back off, watch again
		}
		return
	}
	w.send(ctx, errorEvent(e.Status()))
}

func errorEvent(s metav1.Status) watch.Event {
	return watch.Event{Type: watch.Error, Object: &s}
}

// event converts one informerd event; ok is false for one the caller did
// not ask for.
func (w *streamWatch) event(resp *pb.WatchResponse) (ev watch.Event, ok bool, err error) {
	var typ watch.EventType
	switch resp.GetType() {
	case pb.EventType_EVENT_TYPE_ADDED:
		typ = watch.Added
	case pb.EventType_EVENT_TYPE_MODIFIED:
		typ = watch.Modified
	case pb.EventType_EVENT_TYPE_DELETED:
		typ = watch.Deleted
	case pb.EventType_EVENT_TYPE_BOOKMARK:
		if !w.opts.allowBookmarks {
			return ev, false, nil
		}
		return watch.Event{Type: watch.Bookmark, Object: w.bookmark(resp.GetResourceVersion(), false)}, true, nil
	case pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END:
		if !w.opts.initialEndBookmark && !w.opts.allowBookmarks {
			return ev, false, nil
		}
		return watch.Event{Type: watch.Bookmark, Object: w.bookmark(resp.GetResourceVersion(), w.opts.initialEndBookmark)}, true, nil
	default:
		return ev, false, fmt.Errorf("informerd sent an event of unknown type %s", resp.GetType())
	}
	obj, err := w.codec.Decode(resp.GetObject().GetJson())
	if err != nil {
		return ev, false, err
	}
	if typ == watch.Deleted {
		// As from the API server, a deleted object carries the
		// resourceVersion of its deletion, which the reflector resumes
		// from.
		m, err := meta.Accessor(obj)
		if err != nil {
			return ev, false, err
		}
		m.SetResourceVersion(resp.GetResourceVersion())
	}
	return watch.Event{Type: typ, Object: obj}, true, nil
}

// bookmark returns an empty object of the watched type at rv, annotated as
// the end of the initial events when initialEnd is set.
func (w *streamWatch) bookmark(rv string, initialEnd bool) runtime.Object {
	obj := w.codec.New()
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(rv)
	if initialEnd {
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return obj
}
