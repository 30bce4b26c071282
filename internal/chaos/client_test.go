package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// watcher is a client that does what docs/clients.md tells clients to do:
// list, watch from the list's resourceVersion, resume from the last
// resourceVersion it received (on the other replica when its replica is
// gone), and list again on OUT_OF_RANGE. It keeps its view of the
// namespace and records every broken promise as a violation.
type watcher struct {
	id        int
	ns        string
	part      string // a leaf's part it watches, or "" for the namespace
	replicas  []pb.CacheServiceClient
	stall     chan time.Duration // a request to stop reading for a while
	reconnect chan struct{}      // a request to drop the stream and resume

	mu         sync.Mutex
	state      map[string]uint64 // name → resourceVersion
	lastRV     uint64
	violations []string
	relists    int
	resumes    int
	replica    int // the replica it is connected to, or trying
}

func newWatcher(id int, ns string, replicas []pb.CacheServiceClient) *watcher {
	return &watcher{id: id, ns: ns, replicas: replicas, stall: make(chan time.Duration, 1), reconnect: make(chan struct{}, 1)}
}

func (w *watcher) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf("watcher %d: ", w.id)+fmt.Sprintf(format, args...))
}

// snapshot returns the view and the last resourceVersion.
func (w *watcher) snapshot() (map[string]uint64, uint64, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]uint64, len(w.state))
	for k, v := range w.state {
		out[k] = v
	}
	return out, w.lastRV, append([]string(nil), w.violations...)
}

// run keeps the view current until ctx ends.
func (w *watcher) run(ctx context.Context) {
	replica := w.id % len(w.replicas)
	for ctx.Err() == nil {
		w.mu.Lock()
		w.replica = replica
		w.mu.Unlock()
		err := w.session(ctx, w.replicas[replica])
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.OutOfRange:
			w.mu.Lock()
			w.lastRV, w.state = 0, nil // list again
			w.relists++
			w.mu.Unlock()
		case codes.Canceled:
			// A requested reconnect: same replica.
		default:
			// Its replica is gone or going: the other one.
			replica = (replica + 1) % len(w.replicas)
		}
		w.mu.Lock()
		w.resumes++
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// session lists if it must, then watches until the stream ends.
func (w *watcher) session(ctx context.Context, c pb.CacheServiceClient) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	from := w.lastRV
	w.mu.Unlock()
	if from == 0 {
		state, rv, err := list(sctx, c, w.ns)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.state, w.lastRV, from = state, rv, rv
		w.mu.Unlock()
	}
	stream, err := c.Watch(sctx, &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: w.ns},
		ResourceVersion: strconv.FormatUint(from, 10), AllowBookmarks: true})
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-w.reconnect:
			cancel()
		case <-sctx.Done():
		}
	}()
	for {
		select {
		case d := <-w.stall:
			time.Sleep(d)
		default:
		}
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Unavailable, "stream ended")
			}
			return err
		}
		w.apply(ev)
	}
}

func (w *watcher) apply(ev *pb.WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, err := strconv.ParseUint(ev.GetResourceVersion(), 10, 64)
	if err != nil {
		w.violate("event with resourceVersion %q", ev.GetResourceVersion())
		return
	}
	if ev.GetType() == pb.EventType_EVENT_TYPE_BOOKMARK {
		if rv < w.lastRV {
			w.violate("bookmark at %d after %d", rv, w.lastRV)
		}
		w.lastRV = max(w.lastRV, rv)
		return
	}
	// Events of one relist's deletes share its resourceVersion
	// (docs/api.md), so equal is allowed; going back is not.
	if rv < w.lastRV {
		w.violate("%s %s at %d after %d: resourceVersions went back", ev.GetType(), ev.GetObject().GetName(), rv, w.lastRV)
	}
	w.lastRV = max(w.lastRV, rv)
	name := ev.GetObject().GetName()
	objRV, _ := strconv.ParseUint(ev.GetObject().GetResourceVersion(), 10, 64)
	prev, had := w.state[name]
	switch ev.GetType() {
	case pb.EventType_EVENT_TYPE_ADDED:
		if had {
			w.violate("ADDED %s at %d, already held at %d: a duplicate", name, objRV, prev)
		}
		w.state[name] = objRV
	case pb.EventType_EVENT_TYPE_MODIFIED:
		if !had {
			w.violate("MODIFIED %s at %d, not held", name, objRV)
		} else if objRV <= prev {
			w.violate("MODIFIED %s at %d, held at %d: an event for an object that did not change", name, objRV, prev)
		}
		w.state[name] = objRV
	case pb.EventType_EVENT_TYPE_DELETED:
		if !had {
			w.violate("DELETED %s, not held: a duplicate delete", name)
		}
		delete(w.state, name)
	}
}

// list reads every page of the namespace's configmaps from one snapshot.
func list(ctx context.Context, c pb.CacheServiceClient, ns string) (map[string]uint64, uint64, error) {
	state := map[string]uint64{}
	token := ""
	for {
		resp, err := c.List(ctx, &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: ns}, ContinueToken: token})
		if err != nil {
			return nil, 0, err
		}
		for _, o := range resp.GetObjects() {
			rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
			state[o.GetName()] = rv
		}
		if token = resp.GetContinueToken(); token == "" {
			rv, err := strconv.ParseUint(resp.GetResourceVersion(), 10, 64)
			return state, rv, err
		}
	}
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
