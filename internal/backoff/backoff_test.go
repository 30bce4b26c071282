package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// largest draws the top of every window, so a test sees the windows.
func largest(n int64) int64 { return n - 1 }

func TestWindow(t *testing.T) {
	var got []time.Duration
	for n := range 8 {
		got = append(got, Default.Window(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("windows (-want +got):\n%s", d)
	}
}

// TestRecoveryDoesNotGrow is the outage pattern: the upstream
// fails for a while (three failed attempts), then serves for a healthy
// period, six times. Each outage's waits start again from [0, Base): the
// sixth outage is spaced as the first. With client-go's Reflector, whose
// backoff resets only 2 minutes after its previous reset, the sixth
// outage's first wait was drawn from [30 s, 60 s).
func TestRecoveryDoesNotGrow(t *testing.T) {
	tests := []struct {
		name    string
		healthy time.Duration // between outages
		want    []time.Duration
	}{
		{
			name:    "healthy for ResetAfter between outages",
			healthy: Default.ResetAfter,
			want:    []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			// A flapping upstream (up for less than ResetAfter) is not
			// healthy: the windows go on growing, to the cap.
			name:    "up for less than ResetAfter between outages",
			healthy: Default.ResetAfter - time.Millisecond,
			want:    []time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := Default
				p.Rand = largest
				b := New(p)
				ctx := context.Background()
				var last []time.Duration
				for range 6 {
					last = last[:0]
					for range 3 {
						if err := b.Wait(ctx); err != nil {
							t.Fatal(err)
						}
						last = append(last, b.Failed()+time.Nanosecond) // the window
					}
					if err := b.Wait(ctx); err != nil {
						t.Fatal(err)
					}
					b.Healthy()
					time.Sleep(tc.healthy)
				}
				if d := cmp.Diff(tc.want, last); d != "" {
					t.Errorf("the sixth outage's windows (-want +got):\n%s", d)
				}
			})
		})
	}
}

// TestWaitSleepsTheDraw: Wait sleeps what the last failure drew, from the
// failure; an attempt that reports its failure twice counts once; after a
// success Wait does not wait.
func TestWaitSleepsTheDraw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked []int64
		p := Default
		p.Rand = func(n int64) int64 { asked = append(asked, n); return n * 7 / 10 }
		b := New(p)
		ctx := context.Background()
		start := time.Now()
		if err := b.Wait(ctx); err != nil || time.Since(start) != 0 {
			t.Fatalf("the first Wait took %v (%v), want none", time.Since(start), err)
		}
		if d := b.Failed(); d != 700*time.Millisecond {
			t.Errorf("the first failure drew %v, want 700ms (0.7 of [0, 1s))", d)
		}
		time.Sleep(200 * time.Millisecond)
		if d := b.Failed(); d != 500*time.Millisecond {
			t.Errorf("the same attempt's second failure says %v is left, want 500ms", d)
		}
		if err := b.Wait(ctx); err != nil || time.Since(start) != 700*time.Millisecond {
			t.Errorf("Wait returned %v after the failure, want 700ms (%v)", time.Since(start), err)
		}
		b.Failed()
		if d := cmp.Diff([]int64{int64(time.Second), int64(2 * time.Second)}, asked); d != "" {
			t.Errorf("windows drawn from (-want +got):\n%s", d)
		}
		start = time.Now()
		if err := b.Wait(ctx); err != nil || time.Since(start) != 1400*time.Millisecond {
			t.Errorf("the second Wait took %v, want 1.4s (%v)", time.Since(start), err)
		}
		b.Healthy()
		start = time.Now()
		if err := b.Wait(ctx); err != nil || time.Since(start) != 0 {
			t.Errorf("a Wait after a success took %v, want none (%v)", time.Since(start), err)
		}
	})
}

func TestWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Default
		p.Rand = largest
		b := New(p)
		b.Failed()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait = %v, want the context's error", err)
		}
	})
}

// TestFullJitter: the draws cover their window, down to 0.
func TestFullJitter(t *testing.T) {
	b := New(Policy{})
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		b.failed = false        // a new attempt, without waiting
		b.healthySince.Store(1) // healthy since 1970: every failure starts from Base
		d := b.Failed()
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi >= time.Second || lo > 50*time.Millisecond || hi < 950*time.Millisecond {
		t.Errorf("2000 first failures drew from [%v, %v], want about [0, 1s)", lo, hi)
	}
}

// outages is the recovery fault's pattern (internal/chaos) as a model: the
// upstream is down for down, ten times, and healthy for healthy between
// outages. An attempt fails while the upstream is down (the broken watch
// first, at the outage's start) and waits what failed returns; healthy is
// told of each success. It returns each outage's recovery: from its start
// to the first attempt that found the upstream back. Run it in a synctest
// bubble.
func outages(down, healthy time.Duration, failed, ok func()) []time.Duration {
	var out []time.Duration
	for range 10 {
		start := time.Now()
		for time.Since(start) < down {
			failed()
		}
		out = append(out, time.Since(start))
		ok()
		time.Sleep(healthy)
	}
	return out
}

// TestClientGoBackoffGrows is the root cause of issue 36's growth, with
// client-go's Reflector's own backoff: its defaults
// (k8s.io/client-go@v0.37.2 tools/cache/reflector.go:62-67, 0.8 s doubling
// to 30 s, jitter 1, reset after 2 minutes) given to
// wait.Backoff.DelayWithReset (reflector.go:336), whose backoffManager.Step
// (k8s.io/apimachinery@v0.37.2 pkg/util/wait/backoff.go:292-304) starts
// again from 0.8 s only when 2 minutes have passed since its previous
// reset. Health does not reset it: outages 6 s apart each start where the
// last one left off. The model drives it and Backoff through ten 2 s
// outages: client-go's waits are given at the bottom of their [d, 2d)
// draw (jitter 0), Backoff's at the top of its [0, w) draw, so the figures
// are the least client-go could take and the most Backoff could.
func TestClientGoBackoffGrows(t *testing.T) {
	const down = 2 * time.Second
	healthy := Default.ResetAfter + time.Second
	synctest.Test(t, func(t *testing.T) {
		clientGo := wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second, Steps: 38, Factor: 2}.
			DelayWithReset(clock.RealClock{}, 2*time.Minute)
		got := outages(down, healthy, func() { time.Sleep(clientGo()) }, func() {})
		want := []time.Duration{2400, 3200, 6400, 12800, 25600, 30000, 30000, 2400, 3200, 6400}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("client-go's least recoveries over ten outages (-want +got):\n%s", d)
		}
		t.Logf("client-go's Reflector backoff: recoveries of at least %v", got)
	})
	synctest.Test(t, func(t *testing.T) {
		p := Default
		p.Rand = largest
		b := New(p)
		failed := func() {
			b.Failed()
			if err := b.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		got := outages(down, healthy, failed, b.Healthy)
		for i, r := range got {
			if r > 3*time.Second {
				t.Errorf("outage %d: recovered after %v, want at most 3s (the waits [0, 1 s), [0, 2 s))", i+1, r)
			}
		}
		t.Logf("Backoff: recoveries of at most %v", got)
	})
}
