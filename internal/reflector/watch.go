package reflector

import (
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
	once    sync.Once
}

func observeWatch(in watch.Interface, observe func(watch.Event)) *observedWatch {
	w := &observedWatch{in: in, out: make(chan watch.Event), observe: observe, stop: make(chan struct{})}
	go w.loop()
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
