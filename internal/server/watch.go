package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/watch"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/limits"
)

// idleBookmark is how long a watch with bookmarks allowed may go without
// anything sent before it gets a BOOKMARK with the latest resourceVersion.
const idleBookmark = 30 * time.Second

// wireType maps the core's event type to the wire's: the one place the two
// meet.
func wireType(t watch.EventType) pb.EventType {
	switch t {
	case watch.Added:
		return pb.EventType_EVENT_TYPE_ADDED
	case watch.Modified:
		return pb.EventType_EVENT_TYPE_MODIFIED
	case watch.Deleted:
		return pb.EventType_EVENT_TYPE_DELETED
	case watch.Bookmark:
		return pb.EventType_EVENT_TYPE_BOOKMARK
	}
	return pb.EventType_EVENT_TYPE_UNSPECIFIED
}

// Watch implements CacheService. It sends encoded messages, which only the
// codec of a server built by NewGRPC can send.
func (s *Server) Watch(req *pb.WatchRequest, stream pb.CacheService_WatchServer) (err error) {
	ctx := stream.Context()
	p, err := s.resource(req.GetResource())
	if err != nil {
		return err
	}
	// Metric labels are the canonical names of served resources, never
	// what a client sent.
	resource := p.Name()
	if n := s.watches.Add(1); n > int64(s.opts.MaxWatches) {
		s.watches.Add(-1)
		s.opts.Observer.StreamEnded(resource, metricsReasonLimit)
		return s.refused(&limits.Exceeded{Limit: "max-watches", Msg: fmt.Sprintf(
			"too many watches: the limit of %d open Watch streams over all clients (--max-watches) is reached; retry later or use another replica", s.opts.MaxWatches)})
	}
	defer s.watches.Add(-1)
	attrs := selectionAttributes("watch", p, req.GetSelector())
	if err := s.authorize(ctx, attrs); err != nil {
		return err
	}
	sel, err := selection(p.Cache(), req.GetSelector())
	if err != nil {
		return err
	}
	mask, err := s.mask(ctx, p, req.GetFields())
	if err != nil {
		return err
	}
	opts := fanout.WatchOptions{
		Mask:              mask,
		Selection:         sel,
		ResourceVersion:   req.GetResourceVersion(),
		SendInitialEvents: req.GetSendInitialEvents(),
		AllowBookmarks:    req.GetAllowBookmarks(),
		Coalesce:          req.GetSlowConsumerPolicy() == pb.SlowConsumerPolicy_SLOW_CONSUMER_POLICY_COALESCE,
		QueueLength:       s.opts.WatchQueueLength,
	}
	if rv := opts.ResourceVersion; rv != "" {
		// A client failing over from a replica that is further along waits
		// here until this cache has caught up.
		if err := s.waitFor(ctx, p.Cache(), rv); err != nil {
			return err
		}
	}
	if s.stopping.Err() != nil {
		return s.watchStatus(errShutdown, opts.ResourceVersion)
	}
	w, initial, at, err := p.Hub().Watch(opts)
	if err != nil {
		if errors.Is(err, indexer.ErrTooOld) {
			s.opts.Observer.StreamEnded(resource, metricsReasonTooOld)
		}
		var tooMany *fanout.TooManyProjectionsError
		if errors.As(err, &tooMany) {
			s.opts.Observer.StreamEnded(resource, metricsReasonLimit)
			return s.refused(projectionLimit(tooMany, resource))
		}
		return s.watchStatus(err, opts.ResourceVersion)
	}
	defer w.Close()
	defer func() { s.opts.Observer.StreamEnded(resource, endReason(ctx, err)) }()
	// wctx ends, with the status as its cause, when the caller loses its
	// token or permission.
	wctx, revoke := context.WithCancelCause(ctx)
	if _, open := s.opts.Authorizer.(auth.None); !open {
		rechecked := make(chan struct{})
		go func() { defer close(rechecked); s.recheckLoop(wctx, revoke, attrs) }()
		defer func() { <-rechecked }()
	}
	defer revoke(nil)
	// Headers now tell a client the watch is admitted and registered, before
	// any event (a quiet selection may have none for a long time).
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	observe := s.opts.Observer.DeliveryObserver(resource)
	send := func(items []fanout.Item) error { return s.send(wctx, stream, observe, items) }
	if err := send(initial); err != nil {
		return err
	}
	if opts.SendInitialEvents {
		end, _ := watchEvent(pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, nil, at)
		if err := stream.SendMsg(end); err != nil {
			return err
		}
	}
	// One timer for the stream's life: it fires when nothing has been sent
	// for idleBookmark, and the stream then offers a BOOKMARK.
	idle := time.NewTimer(idleBookmark)
	defer idle.Stop()
	for {
		if s.stopping.Err() != nil {
			return s.watchStatus(errShutdown, w.SentResourceVersion())
		}
		items, err := w.Poll()
		if err != nil {
			return s.watchStatus(err, w.SentResourceVersion())
		}
		if len(items) == 0 {
			select {
			case <-w.Ready():
				continue
			case <-s.stopping.Done():
				continue
			case <-wctx.Done():
				if lost := accessLost(wctx); lost != nil && ctx.Err() == nil {
					return lost
				}
				return toStatus(ctx.Err()) // the client went away
			case <-idle.C:
				idle.Reset(idleBookmark)
				it, ok := w.IdleBookmark()
				if !ok {
					continue
				}
				items = []fanout.Item{it}
			}
		}
		if err := send(items); err != nil {
			return err
		}
		idle.Reset(idleBookmark)
	}
}

// accessLost returns the status that ended ctx when the caller lost its
// token or permission (recheckLoop's cause), else nil.
func accessLost(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if _, isStatus := status.FromError(cause); isStatus {
		return cause
	}
	return nil
}

// send sends items, but none after the caller's access was revoked (ctx's
// cause is then its status), even in the middle of a long initial list. A
// client gone is found by stream.SendMsg. Each object's JSON is shared by
// every stream it goes to; only a few bytes are encoded per stream.
func (s *Server) send(ctx context.Context, stream pb.CacheService_WatchServer, observe func(time.Duration), items []fanout.Item) error {
	for _, it := range items {
		if lost := accessLost(ctx); lost != nil {
			return lost
		}
		m, err := watchEvent(wireType(it.Type), it.Object, it.ResourceVersion)
		if err != nil {
			// A damaged cold object (an initial or replayed one): the
			// stream ends with a status, and the client lists again once
			// the cache has repaired it.
			return toStatus(err)
		}
		if err := stream.SendMsg(m); err != nil {
			return err
		}
		if !it.Applied.IsZero() {
			observe(time.Since(it.Applied))
		}
	}
	return nil
}

// Reasons of the streams-ended metric; the metrics package documents them.
const (
	metricsReasonSlow       = "slow"
	metricsReasonTooOld     = "too_old_resource_version"
	metricsReasonShutdown   = "shutdown"
	metricsReasonClientGone = "client_gone"
	metricsReasonLimit      = "limit"
	metricsReasonRevoked    = "revoked"
)

// recheckLoop re-checks the caller's access every RecheckInterval until ctx
// ends, and ends the watch through revoke when it is gone.
func (s *Server) recheckLoop(ctx context.Context, revoke context.CancelCauseFunc, a auth.Attributes) {
	// A random first interval spreads the re-checks of streams opened
	// together over time.
	first := time.NewTimer(rand.N(s.opts.RecheckInterval) + 1)
	select {
	case <-ctx.Done():
		first.Stop()
		return
	case <-first.C:
	}
	t := time.NewTicker(s.opts.RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.recheck(ctx, a)
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied:
			revoke(err)
			return
		}
		// Anything else (the API server unreachable) keeps the watch: it
		// was allowed, and informerd keeps serving through outages.
	}
}

// endReason classifies how a started watch ended: the client's context is
// done when it went away (a failed Send included); otherwise the status says.
func endReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return metricsReasonClientGone
	}
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return metricsReasonSlow
	case codes.OutOfRange:
		// A resumed watch whose resourceVersion left the history window
		// before its replay was read.
		return metricsReasonTooOld
	case codes.Unavailable:
		return metricsReasonShutdown
	case codes.PermissionDenied, codes.Unauthenticated:
		return metricsReasonRevoked
	}
	return metricsReasonClientGone
}

func (s *Server) waitFor(ctx context.Context, ix *indexer.Indexer, rv string) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		wctx, cancel = context.WithTimeout(ctx, maxWait)
	}
	defer cancel()
	return toStatus(ix.WaitFor(wctx, rv))
}

// watchStatus maps how a watch ended to the status the client gets.
func (s *Server) watchStatus(err error, lastRV string) error {
	meta := map[string]string{"last_resource_version": lastRV}
	var tooSlow *fanout.TooSlowError
	switch {
	case errors.As(err, &tooSlow):
		meta["last_resource_version"] = tooSlow.LastResourceVersion
		return withInfo(codes.ResourceExhausted, pb.ErrorReason_SLOW_CONSUMER,
			"this watch fell behind the history window and was ended; watch again from last_resource_version, or list again if that is too old (or ask for slow_consumer_policy COALESCE)", meta)
	case errors.Is(err, errShutdown), errors.Is(err, fanout.ErrClosed):
		return withInfo(codes.Unavailable, pb.ErrorReason_SHUTTING_DOWN,
			"informerd is shutting down; watch again (on another replica) from last_resource_version "+lastRV, meta)
	}
	return toStatus(err)
}
