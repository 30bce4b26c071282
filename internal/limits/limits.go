// Package limits bounds what one client identity may hold and start: open
// Watch streams and the rate of new Watch calls. The total over all clients
// is the server's own limit.
//
// A Limiter is safe for concurrent use.
package limits

import (
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
	MaxIdentities         = "max-identities"
)

// Exceeded is the error of a call refused by a limit.
type Exceeded struct {
	// Limit is one of the names above (or another package's).
	Limit string
	Msg   string
}

func (e *Exceeded) Error() string { return e.Msg }

// Options of a Limiter; zero values take the defaults.
type Options struct {
	// MaxWatchesPerIdentity bounds one identity's open Watch streams.
	MaxWatchesPerIdentity int
	// WatchRate and WatchBurst bound how fast one identity may start Watch
	// calls (a token bucket: WatchRate per second, WatchBurst at once).
	WatchRate  float64
	WatchBurst int
	// MaxIdentities bounds the identities tracked at once. Idle ones (no
	// stream, full bucket) are forgotten to make room; past it, calls of new
	// identities are refused.
	MaxIdentities int
}

// Defaults.
const (
	DefaultMaxWatchesPerIdentity = 1000
	DefaultWatchRate             = 50
	DefaultWatchBurst            = 200
	DefaultMaxIdentities         = 10000
)

// Limiter tracks each identity's streams and call rate.
type Limiter struct {
	opts Options
	now  func() time.Time

	mu  sync.Mutex
	ids map[string]*identity
}

type identity struct {
	streams int
	bucket  *rate.Limiter
}

// New returns a Limiter.
func New(opts Options) *Limiter {
	if opts.MaxWatchesPerIdentity <= 0 {
		opts.MaxWatchesPerIdentity = DefaultMaxWatchesPerIdentity
	}
	if opts.WatchRate <= 0 {
		opts.WatchRate = DefaultWatchRate
	}
	if opts.WatchBurst <= 0 {
		opts.WatchBurst = DefaultWatchBurst
	}
	if opts.MaxIdentities <= 0 {
		opts.MaxIdentities = DefaultMaxIdentities
	}
	return &Limiter{opts: opts, now: time.Now, ids: map[string]*identity{}}
}

// StartWatch admits one Watch stream of the named identity, or returns an
// *Exceeded. A nil error comes with release, to call once when the stream
// ends.
func (l *Limiter) StartWatch(name string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	id, ok := l.ids[name]
	if !ok {
		if len(l.ids) >= l.opts.MaxIdentities {
			l.forgetIdleLocked(now)
		}
		if len(l.ids) >= l.opts.MaxIdentities {
			return nil, &Exceeded{Limit: MaxIdentities, Msg: fmt.Sprintf(
				"too many client identities at once: informerd tracks at most %d (--%s); retry later", l.opts.MaxIdentities, MaxIdentities)}
		}
		id = &identity{bucket: rate.NewLimiter(rate.Limit(l.opts.WatchRate), l.opts.WatchBurst)}
		l.ids[name] = id
	}
	// Every call spends a token, admitted or not: a client retrying in a
	// tight loop against the stream limit is slowed down too.
	if !id.bucket.AllowN(now, 1) {
		return nil, &Exceeded{Limit: WatchRate, Msg: fmt.Sprintf(
			"identity %q starts Watch calls faster than %g per second (burst %d; --%s, --watch-burst); back off and retry", name, l.opts.WatchRate, l.opts.WatchBurst, WatchRate)}
	}
	if id.streams >= l.opts.MaxWatchesPerIdentity {
		return nil, &Exceeded{Limit: MaxWatchesPerIdentity, Msg: fmt.Sprintf(
			"identity %q already has %d open Watch streams, the limit (--%s); close some, or share one watch between readers", name, id.streams, MaxWatchesPerIdentity)}
	}
	id.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			id.streams--
			l.mu.Unlock()
		})
	}, nil
}

// forgetIdleLocked drops identities with no stream and a full bucket: they
// would be admitted exactly as a new identity is.
func (l *Limiter) forgetIdleLocked(now time.Time) {
	for name, id := range l.ids {
		if id.streams == 0 && id.bucket.TokensAt(now) >= float64(l.opts.WatchBurst) {
			delete(l.ids, name)
		}
	}
}

// Identities returns how many identities are tracked (for tests and metrics).
func (l *Limiter) Identities() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}
