// Package limits bounds what one client may hold and start: open Watch
// streams, and the rate of new Watch and List calls. The total over all
// clients is the server's own limit.
//
// A call past the rate is not refused at once: like kube-apiserver's
// priority and fairness, it waits its turn in a bounded queue, for a bounded
// time, and is refused (with the time its turn would have come) only when
// the queue is full or the turn too far off. A burst of reconnects — a node
// reboot, a rollout, a restart of informerd — is spread out, not failed.
//
// A Limiter is safe for concurrent use; a waiting call holds no lock.
package limits

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Names of limits, as errors and the limit label of
// informerd_limit_rejections_total name them. Each is also a flag.
const (
	MaxWatchesPerIdentity = "max-watches-per-identity"
	WatchRate             = "watch-rate"
	ListRate              = "list-rate"
	MaxIdentities         = "max-identities"
	MaxQueuedPerIdentity  = "max-queued-per-identity"
	MaxQueued             = "max-queued"
)

// Names of the flags that shape the limits above without being one.
const (
	WatchBurst   = "watch-burst"
	ListBurst    = "list-burst"
	MaxQueueWait = "max-queue-wait"
)

// Exceeded is the error of a call refused by a limit.
type Exceeded struct {
	// Limit is one of the names above (or another package's).
	Limit string
	Msg   string
	// RetryAfter, when not zero, is when the client's turn would have come:
	// a retry before it is refused again.
	RetryAfter time.Duration
}

func (e *Exceeded) Error() string { return e.Msg }

// Options of a Limiter; zero values take the defaults.
type Options struct {
	// MaxWatchesPerIdentity bounds one client's open Watch streams.
	MaxWatchesPerIdentity int
	// WatchRate and WatchBurst bound how fast one client may start Watch
	// calls (a token bucket: WatchRate per second, WatchBurst at once);
	// ListRate and ListBurst, List calls (first pages; the pages after a
	// continue token are free).
	WatchRate  float64
	WatchBurst int
	ListRate   float64
	ListBurst  int
	// MaxQueueWait bounds how long a call past the rate waits for its turn.
	// A call whose turn is further off, or after its deadline, is refused
	// at once.
	MaxQueueWait time.Duration
	// MaxQueuedPerIdentity bounds one client's calls waiting their turn,
	// MaxQueued those of all clients; a call past either is refused.
	MaxQueuedPerIdentity int
	MaxQueued            int
	// MaxIdentities bounds the clients tracked at once. Idle ones (no
	// stream, no waiting call, full buckets) are forgotten to make room;
	// past it, calls of new clients are refused.
	MaxIdentities int
	// Waited, if set, is told how long each admitted call waited for its
	// turn, with its rate's name (WatchRate, ListRate). Calls admitted at
	// once are not reported.
	Waited func(limit string, waited time.Duration)
}

// Defaults.
const (
	DefaultMaxWatchesPerIdentity = 1000
	DefaultWatchRate             = 50
	DefaultWatchBurst            = 200
	DefaultListRate              = 50
	DefaultListBurst             = 200
	DefaultMaxQueueWait          = 15 * time.Second
	DefaultMaxQueuedPerIdentity  = 1000
	DefaultMaxQueued             = 10000
	DefaultMaxIdentities         = 10000
)

// Limiter tracks each client's streams, call rates and waiting calls. A
// client is whatever the caller names it by: an authenticated user, or a
// connection.
type Limiter struct {
	opts        Options
	watch, list call

	mu      sync.Mutex
	ids     map[string]*identity
	waiting int // calls waiting their turn, over all clients
}

// identity is one client's state, guarded by Limiter.mu.
type identity struct {
	streams        int
	waiting        int
	watches, lists *rate.Limiter
}

// call describes one kind of call the Limiter admits.
type call struct {
	name                string // as the client calls it: "Watch"
	rateFlag, burstFlag string // the first is also the limit's name
	rate                float64
	burst               int
	bucket              func(*identity) *rate.Limiter
	stream              bool // it holds one of MaxWatchesPerIdentity
}

// New returns a Limiter.
func New(opts Options) *Limiter {
	defaultTo(&opts.MaxWatchesPerIdentity, DefaultMaxWatchesPerIdentity)
	defaultTo(&opts.WatchRate, DefaultWatchRate)
	defaultTo(&opts.WatchBurst, DefaultWatchBurst)
	defaultTo(&opts.ListRate, DefaultListRate)
	defaultTo(&opts.ListBurst, DefaultListBurst)
	defaultTo(&opts.MaxQueueWait, DefaultMaxQueueWait)
	defaultTo(&opts.MaxQueuedPerIdentity, DefaultMaxQueuedPerIdentity)
	defaultTo(&opts.MaxQueued, DefaultMaxQueued)
	defaultTo(&opts.MaxIdentities, DefaultMaxIdentities)
	return &Limiter{
		opts: opts,
		watch: call{name: "Watch", rateFlag: WatchRate, burstFlag: WatchBurst, rate: opts.WatchRate, burst: opts.WatchBurst,
			bucket: func(id *identity) *rate.Limiter { return id.watches }, stream: true},
		list: call{name: "List", rateFlag: ListRate, burstFlag: ListBurst, rate: opts.ListRate, burst: opts.ListBurst,
			bucket: func(id *identity) *rate.Limiter { return id.lists }},
		ids: map[string]*identity{},
	}
}

func defaultTo[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// StartWatch admits one Watch stream of client — at once, or after it
// waited its turn if client starts Watch calls faster than the rate — or
// returns an *Exceeded, or ctx's cause if ctx ends while the call waits. A
// nil error comes with release, to call once when the stream ends.
func (l *Limiter) StartWatch(ctx context.Context, client string) (release func(), err error) {
	id, err := l.take(ctx, client, &l.watch)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			id.streams--
			l.mu.Unlock()
		})
	}, nil
}

// StartList admits one List of client as StartWatch admits a Watch, without
// a stream to release.
func (l *Limiter) StartList(ctx context.Context, client string) error {
	_, err := l.take(ctx, client, &l.list)
	return err
}

// take admits one call of kind c, waiting for its turn if it is past c's
// burst. A Watch is counted in its client's streams.
func (l *Limiter) take(ctx context.Context, client string, c *call) (*identity, error) {
	now := time.Now()
	l.mu.Lock()
	id, err := l.identityLocked(client, now)
	if err == nil {
		// A Watch that would be refused after its wait is refused before.
		err = l.roomLocked(client, id, c)
	}
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	r := c.bucket(id).ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		l.admitLocked(id, c)
		l.mu.Unlock()
		return id, nil
	}
	if err := l.queueLocked(ctx, client, id, c, delay, now); err != nil {
		r.CancelAt(now)
		l.mu.Unlock()
		return nil, err
	}
	id.waiting++
	l.waiting++
	l.mu.Unlock()

	waitErr := sleep(ctx, delay)

	l.mu.Lock()
	id.waiting--
	l.waiting--
	if waitErr == nil {
		// The client's other calls may have filled its streams meanwhile.
		if err = l.roomLocked(client, id, c); err == nil {
			l.admitLocked(id, c)
		}
	}
	l.mu.Unlock()
	switch {
	case waitErr != nil:
		// The turn goes to the calls behind this one.
		r.Cancel()
		return nil, fmt.Errorf("%s call of %s waiting for its turn: %w", c.name, client, waitErr)
	case err != nil:
		return nil, err
	}
	if l.opts.Waited != nil {
		l.opts.Waited(c.rateFlag, delay)
	}
	return id, nil
}

// sleep waits d, or until ctx ends, and returns ctx's cause then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// identityLocked returns client's state, tracking it if it is new.
func (l *Limiter) identityLocked(client string, now time.Time) (*identity, error) {
	if id, ok := l.ids[client]; ok {
		return id, nil
	}
	if len(l.ids) >= l.opts.MaxIdentities {
		l.forgetIdleLocked(now)
	}
	if len(l.ids) >= l.opts.MaxIdentities {
		return nil, &Exceeded{Limit: MaxIdentities, Msg: fmt.Sprintf(
			"too many clients at once: informerd tracks at most %d (--%s); retry later", l.opts.MaxIdentities, MaxIdentities)}
	}
	id := &identity{
		watches: rate.NewLimiter(rate.Limit(l.opts.WatchRate), l.opts.WatchBurst),
		lists:   rate.NewLimiter(rate.Limit(l.opts.ListRate), l.opts.ListBurst),
	}
	l.ids[client] = id
	return id, nil
}

// roomLocked refuses a Watch of a client that holds its most streams.
func (l *Limiter) roomLocked(client string, id *identity, c *call) error {
	if c.stream && id.streams >= l.opts.MaxWatchesPerIdentity {
		return &Exceeded{Limit: MaxWatchesPerIdentity, Msg: fmt.Sprintf(
			"%s already has %d open Watch streams, the limit (--%s); close some, or share one watch between readers", client, id.streams, MaxWatchesPerIdentity)}
	}
	return nil
}

func (l *Limiter) admitLocked(id *identity, c *call) {
	if c.stream {
		id.streams++
	}
}

// queueLocked refuses a call whose turn comes after delay when the queues
// are full, the turn is further off than MaxQueueWait, or after the call's
// deadline.
func (l *Limiter) queueLocked(ctx context.Context, client string, id *identity, c *call, delay time.Duration, now time.Time) error {
	refuse := func(limit, why string) error {
		return &Exceeded{Limit: limit, RetryAfter: delay, Msg: fmt.Sprintf(
			"%s starts %s calls faster than %g per second (burst %d; --%s, --%s) and %s; retry in %v",
			client, c.name, c.rate, c.burst, c.rateFlag, c.burstFlag, why, delay.Round(time.Millisecond))}
	}
	switch {
	case id.waiting >= l.opts.MaxQueuedPerIdentity:
		return refuse(MaxQueuedPerIdentity, fmt.Sprintf("%d of its calls already wait their turn (--%s)", id.waiting, MaxQueuedPerIdentity))
	case l.waiting >= l.opts.MaxQueued:
		return refuse(MaxQueued, fmt.Sprintf("%d calls of all clients already wait their turn (--%s)", l.waiting, MaxQueued))
	case delay > l.opts.MaxQueueWait:
		return refuse(c.rateFlag, fmt.Sprintf("this call's turn is %v away, past --%s %v", delay.Round(time.Millisecond), MaxQueueWait, l.opts.MaxQueueWait))
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(now.Add(delay)) {
		return refuse(c.rateFlag, fmt.Sprintf("this call's turn, %v away, comes after its deadline", delay.Round(time.Millisecond)))
	}
	return nil
}

// forgetIdleLocked drops clients with no stream, no waiting call and full
// buckets: they would be admitted exactly as a new client is.
func (l *Limiter) forgetIdleLocked(now time.Time) {
	for name, id := range l.ids {
		if id.streams == 0 && id.waiting == 0 &&
			id.watches.TokensAt(now) >= float64(l.opts.WatchBurst) && id.lists.TokensAt(now) >= float64(l.opts.ListBurst) {
			delete(l.ids, name)
		}
	}
}
