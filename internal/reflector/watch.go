package reflector

import (
	"context"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// observedWatch passes a watch's events through unchanged, calling observe
// on each. Unlike watch.Filter its goroutine also exits when Stop is called
// while an event is waiting to be read, so a stopped watch leaks nothing.
// When its end channel closes (a change it delivered was not queued) it
// stops the watch and ends with a 410 Expired error, so that client-go's
// Reflector lists again instead of watching on from after that change.
type observedWatch struct {
	in      watch.Interface
	out     chan watch.Event
	observe func(watch.Event)
	stop    chan struct{}
	done    <-chan struct{}
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
	w := &observedWatch{in: in, out: make(chan watch.Event), observe: observe, onEmpty: onEmpty, stop: make(chan struct{}), done: ctx.Done(), end: end}
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
	select {
	case w.out <- watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGone,
		Reason:  metav1.StatusReasonExpired,
		Message: "informerd did not cache a change of this watch; listing again to recover it",
	}}:
	case <-w.stop:
	case <-w.done:
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
