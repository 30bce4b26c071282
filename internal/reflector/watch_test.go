package reflector

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestObservedWatchPassesEventsAndObservesErrors(t *testing.T) {
	fake := watch.NewFake()
	var wg sync.WaitGroup
	var seen []watch.EventType
	w := observeWatch(context.Background(), fake, &wg, func(ev watch.Event) { seen = append(seen, ev.Type) }, nil)
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
	w := observeWatch(context.Background(), fake, &wg, func(watch.Event) {}, nil)
	fake.Add(&metav1.Status{})
	w.Stop()
	wg.Wait()
}

func TestObservedWatchEndsWithContext(t *testing.T) {
	fake := watch.NewFakeWithChanSize(1, false)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	observeWatch(ctx, fake, &wg, func(watch.Event) {}, nil)
	fake.Add(&metav1.Status{})
	cancel()
	wg.Wait()
}

func TestObservedWatchReportsAnEmptyWatch(t *testing.T) {
	fake := watch.NewFake()
	var wg sync.WaitGroup
	empty := make(chan struct{}, 1)
	w := observeWatch(context.Background(), fake, &wg, func(watch.Event) {}, func() { empty <- struct{}{} })
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
