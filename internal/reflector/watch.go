package reflector

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// observedWatch passes a watch's events through unchanged, calling observe
// on each. Unlike watch.Filter its goroutine also exits when Stop is called
// while an event is waiting to be read, so a stopped watch leaks nothing.
type observedWatch struct {
	in      watch.Interface
	out     chan watch.Event
	observe func(watch.Event)
	stop    chan struct{}
	done    <-chan struct{}
	once    sync.Once
	// onEmpty is called when the watch closes within a second without an
	// event and without Stop.
	onEmpty func()
}

// observeWatch starts the pass-through goroutine, tracked by wg.
// It also ends when ctx (the watch request's) is done, even if nobody calls
// Stop.
func observeWatch(ctx context.Context, in watch.Interface, wg *sync.WaitGroup, observe func(watch.Event), onEmpty func()) *observedWatch {
	w := &observedWatch{in: in, out: make(chan watch.Event), observe: observe, onEmpty: onEmpty, stop: make(chan struct{}), done: ctx.Done()}
	wg.Go(w.loop)
	return w
}

func (w *observedWatch) loop() {
	defer close(w.out)
	start, events := time.Now(), 0
	defer func() {
		// client-go turns a connection that fails with EOF into an empty
		// watch that closes at once; the Reflector retries quietly. That is
		// an upstream problem worth reporting.
		if events == 0 && time.Since(start) < time.Second && !w.stopped() && w.onEmpty != nil {
			w.onEmpty()
		}
	}()
	for ev := range w.in.ResultChan() {
		events++
		w.observe(ev)
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		case <-w.done:
			w.in.Stop()
			return
		}
	}
}

func (w *observedWatch) stopped() bool {
	select {
	case <-w.stop:
		return true
	case <-w.done:
		return true
	default:
		return false
	}
}

// ResultChan implements watch.Interface.
func (w *observedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface; it may be called more than once.
func (w *observedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}
