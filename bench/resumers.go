package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// resumers are W gRPC watchers that behave as a careful client does across
// an informerd restart: each watches one node's pods from a
// resourceVersion, remembers the last one it received (events and
// bookmarks), and when its stream ends calls Watch again from it. Refused
// with OUT_OF_RANGE (informerd's history no longer reaches it) it lists
// again: a Watch with send_initial_events, every pod of its node sent
// again, then the changes after.
//
// mark starts a count: from then on each watcher records whether it was
// refused (and relisted) or resumed, and which of the expected writes it
// received after resuming.
type resumers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn
	ws     []*resumer
	resent atomic.Int64 // objects received in relists since mark

	mu     sync.Mutex
	marked bool
	expect map[string]map[string]bool // node → resourceVersions of the writes a resumed watcher must receive
}

type resumer struct {
	node string
	// Since mark, under resumers.mu:
	outOfRange bool // refused at least once
	relisted   bool // a relist completed after a refusal
	resumed    bool // admitted from its resourceVersion by the restarted informerd
	caught     int  // expected writes received
}

// resumerConnect is how the resumers' connections reconnect: faster than
// grpc-go's default (1s, growing 1.6× to 2 minutes), so that every
// watcher is back within a second of informerd listening again.
var resumerConnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// startResumers opens n watchers on informerd at addr, watcher i on node
// i%nodes from resourceVersion rv, and returns once each is admitted.
func startResumers(ctx context.Context, addr string, n, nodes int, rv string) (*resumers, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &resumers{cancel: cancel}
	var client pb.CacheServiceClient
	admitted := make(chan error, n)
	for i := range n {
		if i%watchesPerConn == 0 {
			conn, err := dial(addr, resumerConnect)
			if err != nil {
				r.close()
				return nil, err
			}
			r.conns = append(r.conns, conn)
			client = pb.NewCacheServiceClient(conn)
		}
		w := &resumer{node: nodeName(i, nodes)}
		r.ws = append(r.ws, w)
		r.wg.Go(func() { r.run(ctx, client, w, rv, admitted) })
	}
	for range n {
		select {
		case err := <-admitted:
			if err != nil {
				r.close()
				return nil, err
			}
		case <-time.After(time.Minute):
			r.close()
			return nil, fmt.Errorf("%d watchers not admitted within a minute", n)
		}
	}
	return r, nil
}

// run is one watcher's life. first receives nil once it is admitted the
// first time, or the error that refused it.
func (r *resumers) run(ctx context.Context, client pb.CacheServiceClient, w *resumer, rv string, first chan<- error) {
	relist := false
	wait := 200 * time.Millisecond
	for ctx.Err() == nil {
		req := &pb.WatchRequest{Resource: "pods", AllowBookmarks: true,
			Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{w.node}}}}
		if relist {
			req.SendInitialEvents = true
		} else {
			req.ResourceVersion = rv
		}
		stream, err := client.Watch(ctx, req, grpc.WaitForReady(true))
		var md metadata.MD
		if err == nil {
			// grpc-go's Header returns nil, nil when the call failed:
			// Recv then returns the status.
			if md, err = stream.Header(); err == nil && md == nil {
				_, err = stream.Recv()
				if err == nil {
					err = errors.New("a Watch stream with no headers sent a message")
				}
			}
		}
		if err == nil {
			r.admitted(w, relist)
			if first != nil {
				first <- nil
				first = nil
			}
			wait = 200 * time.Millisecond
			var next string
			next, relist, err = r.read(w, stream, relist)
			if next != "" {
				rv = next
			}
		}
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.OutOfRange {
			r.refused(w)
			relist = true
			continue
		}
		if first != nil && status.Code(err) != codes.Unavailable {
			first <- fmt.Errorf("watcher on %s: %w", w.node, err)
			return
		}
		// Unavailable (informerd shutting down, restarting, not synced
		// yet): call again after a backoff, as a client does.
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// read receives a stream's events until it ends, and returns the last
// resourceVersion, whether a relist is still to complete, and the error.
func (r *resumers) read(w *resumer, stream grpc.ServerStreamingClient[pb.WatchResponse], relist bool) (last string, stillRelisting bool, err error) {
	for {
		ev, err := stream.Recv()
		if err != nil {
			return last, relist, err
		}
		switch {
		case relist && ev.GetType() == pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END:
			relist = false
			r.relisted(w)
		case relist:
			r.resent.Add(1)
			continue // an initial object: its resourceVersion is no position
		default:
			r.received(w, ev.GetResourceVersion())
		}
		last = ev.GetResourceVersion()
	}
}

func (r *resumers) admitted(w *resumer, relist bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marked && !relist && !w.outOfRange {
		w.resumed = true
	}
}

func (r *resumers) refused(w *resumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marked {
		w.outOfRange = true
	}
}

func (r *resumers) relisted(w *resumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marked {
		w.relisted = true
	}
}

func (r *resumers) received(w *resumer, rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marked && w.resumed && r.expect[w.node][rv] {
		w.caught++
	}
}

// mark starts counting: refusals, relists and resumptions from now on.
func (r *resumers) mark() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marked, r.expect = true, nil
	for _, w := range r.ws {
		*w = resumer{node: w.node}
	}
	r.resent.Store(0)
}

// expectWrites sets the writes a watcher that resumes must receive: those
// on its node.
func (r *resumers) expectWrites(writes []podWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expect = map[string]map[string]bool{}
	for _, wr := range writes {
		if r.expect[wr.node] == nil {
			r.expect[wr.node] = map[string]bool{}
		}
		r.expect[wr.node][wr.rv] = true
	}
}

// resumeCounts are the watchers' fates since mark.
type resumeCounts struct {
	outOfRange, relisted, resumed, recovered int
	caught, expected                         int // writes received by resumed watchers, and due to them
}

func (r *resumers) counts() resumeCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c resumeCounts
	for _, w := range r.ws {
		due := len(r.expect[w.node])
		if w.outOfRange {
			c.outOfRange++
		}
		if w.relisted {
			c.relisted++
		}
		if w.resumed {
			c.resumed++
			c.caught += w.caught
			c.expected += due
		}
		if (w.outOfRange && w.relisted) || (!w.outOfRange && w.resumed && w.caught >= due) {
			c.recovered++
		}
	}
	return c
}

// waitRecovered waits until every watcher has resumed and received the
// writes due to it, or relisted, and returns the counts then; at limit it
// returns the counts so far.
func (r *resumers) waitRecovered(ctx context.Context, limit time.Duration) resumeCounts {
	deadline := time.Now().Add(limit)
	for {
		c := r.counts()
		if c.recovered == len(r.ws) || time.Now().After(deadline) || ctx.Err() != nil {
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close ends the watchers and their connections.
func (r *resumers) close() {
	r.cancel()
	r.wg.Wait()
	for _, c := range r.conns {
		c.Close()
	}
}
