package reflector

import (
	"context"
	"sync"

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
}

// observeWatch starts the pass-through goroutine, tracked by wg.
// It also ends when ctx (the watch request's) is done, even if nobody calls
// Stop.
func observeWatch(ctx context.Context, in watch.Interface, wg *sync.WaitGroup, observe func(watch.Event)) *observedWatch {
	w := &observedWatch{in: in, out: make(chan watch.Event), observe: observe, stop: make(chan struct{}), done: ctx.Done()}
	wg.Go(w.loop)
	return w
}

func (w *observedWatch) loop() {
	defer close(w.out)
	for ev := range w.in.ResultChan() {
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

// ResultChan implements watch.Interface.
func (w *observedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface; it may be called more than once.
func (w *observedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}
