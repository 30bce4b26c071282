// Package backoff spaces the retries of something that keeps failing — a
// watch of the API server, a leaf's watch of its upstream informerd, a
// gRPC client's watch — so that the retries after an outage neither hammer
// the server nor arrive at it together, and so that recovery does not
// slow down over repeated outages.
//
// The policy is "full jitter" (AWS Architecture Blog, "Exponential Backoff
// and Jitter"): the n-th failure in a row waits a uniformly random time in
// [0, min(Cap, Base·2^n)). The count starts again from 0 once the retried
// thing has been healthy for ResetAfter without a failure, measured from
// its first success after the last failure, not from the last reset:
// client-go's Reflector resets its backoff (wait.Backoff.DelayWithReset)
// only when 2 minutes have passed since its previous reset, however long
// the watch was healthy in between, so outages a minute apart make every
// recovery slower than the one before (docs/reliability.md).
package backoff

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Policy is how retries are spaced. The zero value of a field is its
// Default's.
type Policy struct {
	// Base is the largest wait after the first failure; each failure in a
	// row doubles it, up to Cap.
	Base, Cap time.Duration
	// ResetAfter is how long the retried thing must have been healthy
	// (a watch admitted or delivering, a list answered) for the next
	// failure to start from Base again.
	ResetAfter time.Duration
	// Rand returns a uniformly random number in [0, n); nil is
	// math/rand/v2's Int64N. Tests set it.
	Rand func(n int64) int64
}

// Default is informerd's policy: waits from [0, 1 s) growing to [0, 30 s),
// reset after 5 s of health.
var Default = Policy{Base: time.Second, Cap: 30 * time.Second, ResetAfter: 5 * time.Second}

func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = Default.Base
	}
	if p.Cap <= 0 {
		p.Cap = Default.Cap
	}
	p.Cap = max(p.Cap, p.Base)
	if p.ResetAfter <= 0 {
		p.ResetAfter = Default.ResetAfter
	}
	if p.Rand == nil {
		p.Rand = rand.Int64N
	}
	return p
}

// Window is the range the wait after the n-th failure in a row (n from 0)
// is drawn from: [0, Window(n)).
func (p Policy) Window(n int) time.Duration {
	p = p.withDefaults()
	w := p.Base
	for ; n > 0 && w < p.Cap; n-- {
		w *= 2
	}
	return min(w, p.Cap)
}

// Backoff is the retry state of one retried thing: call Wait before each
// attempt, Failed when the attempt fails and Healthy when it works. Its
// methods may be called concurrently; Healthy is cheap enough for every
// event of a watch.
type Backoff struct {
	policy Policy

	// healthySince is the unix-nano time of the first success since the
	// last failure; 0 when there was none.
	healthySince atomic.Int64

	mu sync.Mutex
	// failures is the count of failures in a row (the next window's n).
	failures int
	// due is the earliest time of the next attempt.
	due time.Time
	// failed: the attempt since the last Wait has failed already; a
	// failure reported twice (an error and the end it causes) counts once.
	failed bool
}

// New returns the state of a retried thing that has not failed yet.
func New(p Policy) *Backoff { return &Backoff{policy: p.withDefaults()} }

// Wait blocks until the wait the last failure drew has passed (at once when
// the last attempt did not fail), or ctx ends, and starts a new attempt.
func (b *Backoff) Wait(ctx context.Context) error {
	b.mu.Lock()
	d := time.Until(b.due)
	b.failed = false
	b.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Failed records that the current attempt failed and returns the wait it
// drew: a uniformly random duration in [0, Window(n)), n the failures in a
// row before it, or 0 after a healthy period of ResetAfter. A second call
// for the same attempt (before the next Wait) changes nothing.
func (b *Backoff) Failed() time.Duration {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed {
		return max(0, b.due.Sub(now))
	}
	b.failed = true
	if since := b.healthySince.Swap(0); since != 0 && now.Sub(time.Unix(0, since)) >= b.policy.ResetAfter {
		b.failures = 0
	}
	window := b.policy.Window(b.failures)
	if window < b.policy.Cap {
		b.failures++
	}
	d := time.Duration(b.policy.Rand(int64(window)))
	b.due = now.Add(d)
	return d
}

// Capped reports whether the failures in a row have grown the window to
// Cap: the retried thing has failed for a while (about Cap), worth a
// visible log line rather than one per attempt.
func (b *Backoff) Capped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.policy.Window(b.failures) >= b.policy.Cap
}

// Healthy records that the retried thing works: a watch admitted or an
// event received, a list answered. Once it has been healthy for
// ResetAfter, the next failure starts from Base again.
func (b *Backoff) Healthy() {
	if b.healthySince.Load() != 0 {
		return
	}
	b.healthySince.CompareAndSwap(0, time.Now().UnixNano())
}
