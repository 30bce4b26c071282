package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/informerd/informerd/internal/backoff"
)

// Backoff is how a ListWatch spaces its calls while informerd refuses them
// as unavailable (a replica down, restarting or shutting down, a resource
// not synced yet) or overloaded: the n-th refusal in a row waits a
// uniformly random time in [0, min(Cap, Base·2^n)) ("full jitter"), so
// that the watchers of a replica that restarts come back spread over the
// window rather than together, and n starts again from 0 once a watch has
// been healthy for ResetAfter, so that recovery does not slow down over
// repeated outages. A zero field takes DefaultBackoff's value.
type Backoff struct {
	Base, Cap  time.Duration
	ResetAfter time.Duration
}

// DefaultBackoff waits from [0, 1 s), doubling to [0, 30 s), and starts
// again after 5 s of health.
var DefaultBackoff = Backoff{Base: backoff.Default.Base, Cap: backoff.Default.Cap, ResetAfter: backoff.Default.ResetAfter}

// jitter draws the waits; nil is math/rand/v2. Tests set it.
var jitter func(n int64) int64

func (b Backoff) policy() backoff.Policy {
	return backoff.Policy{Base: b.Base, Cap: b.Cap, ResetAfter: b.ResetAfter, Rand: jitter}
}

// retriable reports whether informerd refused a call for a while rather
// than for good: UNAVAILABLE or RESOURCE_EXHAUSTED, which the API status
// of an *Error shows as 429.
func retriable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

// retry calls f until it succeeds, fails for good or ctx ends, waiting
// before each call what the last refusal drew from lw's backoff. Without
// retries (Options.NoRetry) it calls f once.
func (lw *ListWatch) retry(ctx context.Context, what string, f func() error) error {
	if lw.backoff == nil {
		return f()
	}
	for {
		if err := lw.backoff.Wait(ctx); err != nil {
			return err
		}
		err := f()
		if err == nil {
			lw.backoff.Healthy()
			return nil
		}
		if !retriable(err) || ctx.Err() != nil {
			return err
		}
		d := lw.backoff.Failed()
		logRetry(ctx, lw.backoff, "informerd refused the call; retrying", "call", what, "resource", lw.opts.Resource, "err", err, "after", d)
	}
}

// logRetry logs a retry: verbosely while the backoff grows, so that a
// herd of reconnecting watchers does not flood the log, and for everyone
// once it has reached its cap (refusals for about half a minute), as
// client-go logs a reflector's failures.
func logRetry(ctx context.Context, b *backoff.Backoff, msg string, kv ...any) {
	logger := klog.FromContext(ctx)
	if !b.Capped() {
		logger = logger.V(2)
	}
	logger.Info(msg, kv...)
}

// reconnect is how a connection Dial returns connects again after it
// broke. grpc-go's default waits exactly 1 s before its second attempt —
// the same second for every client of a replica that died, a herd — then
// 1.6 times more each time, ±20 %, up to 2 minutes, so that a long outage
// could add minutes to the recovery. These attempts wait 250 ms, then a
// random time in [0, 2·min(1 s, 250 ms·2^n)) (grpc-go's jitter of 1 spans
// [0, 2d)): a connection is back within about a second of its replica's
// return, quick enough not to hold up the calls, whose own backoff
// (Backoff) spreads them; a refused connection attempt costs next to
// nothing.
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 2, Jitter: 1, MaxDelay: time.Second},
	MinConnectTimeout: 20 * time.Second,
})
