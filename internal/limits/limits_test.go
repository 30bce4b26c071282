package limits

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// step is one call of a test: who makes it, when, and how it may end early.
type step struct {
	at     time.Duration // when the call starts
	client string
	list   bool
	// deadline and cancel, when set, end the call's context that long
	// after it starts.
	deadline, cancel time.Duration
	// hold is how long an admitted Watch keeps its stream; 0 keeps it to
	// the end of the test.
	hold time.Duration
}

// outcome is how a call ended and when (since the test began).
type outcome struct {
	At         time.Duration
	Result     string // "admitted", a limit's name, or the context's error
	RetryAfter time.Duration
}

func TestLimiter(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	a := func(at time.Duration) step { return step{at: at, client: "a"} }
	tests := []struct {
		name       string
		opts       Options
		steps      []step
		want       []outcome
		wantWaited []string
	}{{
		name:  "a burst is admitted at once, the calls past it one per 1/rate",
		opts:  Options{WatchRate: 10, WatchBurst: 2},
		steps: []step{a(0), a(0), a(0), a(0), a(0)},
		want: []outcome{{0, "admitted", 0}, {0, "admitted", 0},
			{100 * ms, "admitted", 0}, {200 * ms, "admitted", 0}, {300 * ms, "admitted", 0}},
		wantWaited: []string{"watch-rate 100ms", "watch-rate 200ms", "watch-rate 300ms"},
	}, {
		name:  "another client is not held up by the calls a's waiting",
		opts:  Options{WatchRate: 1, WatchBurst: 1},
		steps: []step{a(0), a(0), a(0), {client: "b"}, {at: 500 * ms, client: "b"}},
		want: []outcome{{0, "admitted", 0}, {1 * s, "admitted", 0}, {2 * s, "admitted", 0},
			{0, "admitted", 0}, {1 * s, "admitted", 0}},
		wantWaited: []string{"watch-rate 500ms", "watch-rate 1s", "watch-rate 2s"},
	}, {
		name:  "a client's queue is bounded",
		opts:  Options{WatchRate: 1, WatchBurst: 1, MaxQueuedPerIdentity: 2},
		steps: []step{a(0), a(0), a(0), a(0), {client: "b"}, {client: "b"}},
		want: []outcome{{0, "admitted", 0}, {1 * s, "admitted", 0}, {2 * s, "admitted", 0},
			{0, MaxQueuedPerIdentity, 3 * s}, {0, "admitted", 0}, {1 * s, "admitted", 0}},
		wantWaited: []string{"watch-rate 1s", "watch-rate 1s", "watch-rate 2s"},
	}, {
		name:  "the queue of all clients is bounded",
		opts:  Options{WatchRate: 1, WatchBurst: 1, MaxQueued: 2},
		steps: []step{a(0), a(0), {client: "b"}, {client: "b"}, {client: "c"}, {client: "c"}},
		want: []outcome{{0, "admitted", 0}, {1 * s, "admitted", 0}, {0, "admitted", 0},
			{1 * s, "admitted", 0}, {0, "admitted", 0}, {0, MaxQueued, 1 * s}},
		wantWaited: []string{"watch-rate 1s", "watch-rate 1s"},
	}, {
		name:       "a turn further off than MaxQueueWait is refused at once",
		opts:       Options{WatchRate: 1, WatchBurst: 1, MaxQueueWait: 2 * s},
		steps:      []step{a(0), a(0), a(0), a(0)},
		want:       []outcome{{0, "admitted", 0}, {1 * s, "admitted", 0}, {2 * s, "admitted", 0}, {0, WatchRate, 3 * s}},
		wantWaited: []string{"watch-rate 1s", "watch-rate 2s"},
	}, {
		name:  "a turn after the call's deadline is refused at once",
		opts:  Options{WatchRate: 1, WatchBurst: 1},
		steps: []step{a(0), {client: "a", deadline: 999 * ms}, {client: "a", deadline: 2 * s}},
		want:  []outcome{{0, "admitted", 0}, {0, WatchRate, 1 * s}, {1 * s, "admitted", 0}},
		// The refused call gave its turn back.
		wantWaited: []string{"watch-rate 1s"},
	}, {
		name:  "a call canceled while it waits gives its turn to the next",
		opts:  Options{WatchRate: 1, WatchBurst: 1},
		steps: []step{a(0), {client: "a", cancel: 500 * ms}, a(600 * ms)},
		want:  []outcome{{0, "admitted", 0}, {500 * ms, "context canceled", 0}, {1 * s, "admitted", 0}},
		// Its turn was at 1s, not 2s.
		wantWaited: []string{"watch-rate 400ms"},
	}, {
		name: "a client's streams are bounded, before and after its wait",
		opts: Options{WatchRate: 1, WatchBurst: 1, MaxWatchesPerIdentity: 2},
		// The third is let wait (two streams are not open yet), and
		// refused when its turn comes; the fourth is refused at once.
		steps: []step{a(0), a(0), a(0), a(1500 * ms)},
		want: []outcome{{0, "admitted", 0}, {1 * s, "admitted", 0},
			{2 * s, MaxWatchesPerIdentity, 0}, {1500 * ms, MaxWatchesPerIdentity, 0}},
		wantWaited: []string{"watch-rate 1s"},
	}, {
		name:  "a closed stream makes room",
		opts:  Options{WatchRate: 100, WatchBurst: 100, MaxWatchesPerIdentity: 1},
		steps: []step{{client: "a", hold: time.Second}, a(500 * ms), a(1500 * ms)},
		want:  []outcome{{0, "admitted", 0}, {500 * ms, MaxWatchesPerIdentity, 0}, {1500 * ms, "admitted", 0}},
	}, {
		name: "Lists have a rate of their own",
		opts: Options{WatchRate: 1, WatchBurst: 1, ListRate: 2, ListBurst: 1},
		steps: []step{a(0), {client: "a", list: true}, {client: "a", list: true}, a(0),
			{client: "a", list: true, deadline: 100 * ms}},
		want: []outcome{{0, "admitted", 0}, {0, "admitted", 0}, {500 * ms, "admitted", 0},
			{1 * s, "admitted", 0}, {0, ListRate, 1 * s}},
		wantWaited: []string{"list-rate 500ms", "watch-rate 1s"},
	}, {
		name: "idle clients are forgotten to make room for new ones",
		opts: Options{WatchRate: 1, WatchBurst: 1, MaxIdentities: 1},
		// a's stream closes at 1s and its bucket is full again at 1s.
		steps: []step{{client: "a", hold: time.Second}, {at: 500 * ms, client: "b"}, {at: 1500 * ms, client: "b"}},
		want:  []outcome{{0, "admitted", 0}, {500 * ms, MaxIdentities, 0}, {1500 * ms, "admitted", 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var waited []string
				tt.opts.Waited = func(limit string, d time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					waited = append(waited, fmt.Sprintf("%s %v", limit, d))
				}
				got := run(New(tt.opts), tt.steps)
				slices.Sort(waited) // calls admitted at one time report in any order
				slices.Sort(tt.wantWaited)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantWaited, waited); diff != "" {
					t.Errorf("waits reported (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// run makes the calls of steps in their order — those starting at the same
// time too: each starts once the one before is admitted, refused or
// waiting — and returns their outcomes, once every stream is closed.
func run(l *Limiter, steps []step) []outcome {
	start := time.Now()
	out := make([]outcome, len(steps))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, st := range steps {
		time.Sleep(time.Until(start.Add(st.at)))
		wg.Go(func() {
			ctx := context.Background()
			if st.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, st.deadline)
				defer cancel()
			}
			if st.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer time.AfterFunc(st.cancel, cancel).Stop()
			}
			var err error
			release := func() {}
			if st.list {
				err = l.StartList(ctx, st.client)
			} else {
				release, err = l.StartWatch(ctx, st.client)
			}
			out[i] = outcome{At: time.Since(start), Result: "admitted"}
			var e *Exceeded
			switch {
			case errors.As(err, &e):
				out[i].Result, out[i].RetryAfter = e.Limit, e.RetryAfter
			case err != nil:
				out[i].Result = errors.Unwrap(err).Error()
			}
			if err != nil {
				return
			}
			if st.hold > 0 {
				time.Sleep(st.hold)
			} else {
				<-stop
			}
			release()
			release() // idempotent: a second call must not free another stream
		})
		synctest.Wait()
	}
	// Let every waiting call have its turn, then close the streams.
	time.Sleep(time.Hour)
	close(stop)
	wg.Wait()
	return out
}
