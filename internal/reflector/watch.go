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
// When its end channel closes (a change it delivered was not queued) it
// stops the watch and ends with a 410 Expired error, so that client-go's
// Reflector lists again instead of watching on from after that change.
type observedWatch struct {
	in watch.Interface
	outlet
	observe func(watch.Event)
	end     <-chan struct{}
	once    sync.Once
	// onEmpty is called when the watch closes within a second without an
	// event and without Stop.
	onEmpty func()
}

// observeWatch starts the pass-through goroutine, tracked by wg.
// It also ends when ctx (the watch request's) is done, even if nobody calls
// Stop, and with an error when end closes.
func observeWatch(ctx context.Context, in watch.Interface, wg *sync.WaitGroup, end <-chan struct{}, observe func(watch.Event), onEmpty func()) *observedWatch {
	w := &observedWatch{in: in, outlet: newOutlet(ctx), observe: observe, onEmpty: onEmpty, end: end}
	wg.Go(w.loop)
	return w
}

func (w *observedWatch) loop() {
	defer close(w.out)
	start, events, missed := time.Now(), 0, false
	defer func() {
		// client-go turns a connection that fails with EOF into an empty
		// watch that closes at once; the Reflector retries quietly. That is
		// an upstream problem worth reporting.
		if events == 0 && !missed && time.Since(start) < time.Second && !w.stopped() && w.onEmpty != nil {
			w.onEmpty()
		}
	}()
	for {
		var ev watch.Event
		select {
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			ev = e
		case <-w.end:
			missed = true
			w.endMissed()
			return
		}
		events++
		w.observe(ev)
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		case <-w.done:
			w.in.Stop()
			return
		case <-w.end:
			missed = true
			w.endMissed()
			return
		}
	}
}

// endMissed stops the watch and sends the error that makes client-go's
// Reflector list again: a 410, as when the API server can no longer
// resume from a resourceVersion, which is informerd's case after a missed
// change. It is not observed as an error of the API server's.
func (w *observedWatch) endMissed() {
	w.in.Stop()
	w.sendMissed()
}

// outlet is the consumer's side of a watch informerd passes on to
// client-go's Reflector: the channel events go out on, the channel Stop
// closes, and the watch request's context.
type outlet struct {
	out  chan watch.Event
	stop chan struct{}
	done <-chan struct{}
}

func newOutlet(ctx context.Context) outlet {
	return outlet{out: make(chan watch.Event), stop: make(chan struct{}), done: ctx.Done()}
}

// sendMissed sends the 410 that makes the Reflector list again
// (missedStatus), unless the watch is stopped first.
func (o *outlet) sendMissed() {
	o.deliver(watch.Event{Type: watch.Error, Object: missedStatus()})
}

// deliver sends ev unless the watch is stopped first; false if it is.
func (o *outlet) deliver(ev watch.Event) bool {
	select {
	case o.out <- ev:
		return true
	case <-o.stop:
	case <-o.done:
	}
	return false
}

// stopped reports whether Stop was called or the request's context ended.
func (o *outlet) stopped() bool {
	select {
	case <-o.stop:
		return true
	case <-o.done:
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
