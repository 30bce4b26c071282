package reflector

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestObservedWatchPassesEventsAndObservesErrors(t *testing.T) {
	fake := watch.NewFake()
	var wg sync.WaitGroup
	var seen []watch.EventType
	w := observeWatch(context.Background(), fake, &wg, nil, func(ev watch.Event) { seen = append(seen, ev.Type) }, nil)
	go func() {
		fake.Add(&metav1.Status{})
		fake.Error(&metav1.Status{Code: 410, Reason: metav1.StatusReasonExpired})
	}()
	for _, want := range []watch.EventType{watch.Added, watch.Error} {
		if ev := <-w.ResultChan(); ev.Type != want {
			t.Fatalf("got %s, want %s", ev.Type, want)
		}
	}
	w.Stop()
	w.Stop() // idempotent
	wg.Wait()
	if len(seen) != 2 {
		t.Errorf("observed %v, want both events", seen)
	}
}

// A stopped watch with an event nobody reads must not leave its goroutine
// behind (watch.Filter does).
func TestObservedWatchStopWithPendingEvent(t *testing.T) {
	fake := watch.NewFakeWithChanSize(1, false)
	var wg sync.WaitGroup
	w := observeWatch(context.Background(), fake, &wg, nil, func(watch.Event) {}, nil)
	fake.Add(&metav1.Status{})
	w.Stop()
	wg.Wait()
}

func TestObservedWatchEndsWithContext(t *testing.T) {
	fake := watch.NewFakeWithChanSize(1, false)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	observeWatch(ctx, fake, &wg, nil, func(watch.Event) {}, nil)
	fake.Add(&metav1.Status{})
	cancel()
	wg.Wait()
}

func TestObservedWatchReportsAnEmptyWatch(t *testing.T) {
	fake := watch.NewFake()
	var wg sync.WaitGroup
	empty := make(chan struct{}, 1)
	w := observeWatch(context.Background(), fake, &wg, nil, func(watch.Event) {}, func() { empty <- struct{}{} })
	fake.Stop() // the server side closes with no event
	for range w.ResultChan() {
	}
	wg.Wait()
	select {
	case <-empty:
	default:
		t.Error("an empty watch closed by the other side was not reported")
	}
}

// A watch whose end closes stops the watch under it and ends with a 410,
// whether it was waiting for an event or handing one over, and does not
// report itself as an empty watch.
func TestObservedWatchEndsWithExpiredOnAMissedChange(t *testing.T) {
	tests := []struct {
		name    string
		pending bool // an event waits to be read when end closes
	}{
		{name: "waiting for an event"},
		{name: "handing an event over", pending: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := watch.NewRaceFreeFake()
				end := make(chan struct{})
				var wg sync.WaitGroup
				var observed []watch.EventType
				w := observeWatch(context.Background(), fake, &wg, end, func(ev watch.Event) { observed = append(observed, ev.Type) },
					func() { t.Error("a watch ended for a missed change was reported as empty") })
				if tt.pending {
					fake.Add(&metav1.Status{})
					synctest.Wait()
				}
				close(end)
				ev, ok := <-w.ResultChan()
				if !ok {
					t.Fatal("the watch closed without an error")
				}
				if s, isStatus := ev.Object.(*metav1.Status); ev.Type != watch.Error || !isStatus || !apierrors.IsResourceExpired(apierrors.FromObject(s)) {
					t.Errorf("got %s %#v, want a 410 Expired error", ev.Type, ev.Object)
				}
				if _, ok := <-w.ResultChan(); ok {
					t.Error("the watch went on after its error")
				}
				wg.Wait()
				if !fake.IsStopped() {
					t.Error("the watch under it was not stopped")
				}
				var want []watch.EventType
				if tt.pending {
					want = []watch.EventType{watch.Added}
				}
				if diff := cmp.Diff(want, observed); diff != "" {
					t.Errorf("observed (-want +got): the error is not the API server's\n%s", diff)
				}
			})
		})
	}
}
