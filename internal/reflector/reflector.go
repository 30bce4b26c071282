// Package reflector adapts client-go's Reflector — which owns the list/watch
// protocol: streaming lists, bookmarks, 410 → relist, backoff, pagination —
// to informerd's pipeline. Its Client lists and watches the API server's
// JSON without decoding it (object.Raw); the reflector turns each raw
// object into an encoded object.Object, hands it to the delta queue, and
// records lag signals.
package reflector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/informerd/informerd/internal/backoff"
	"github.com/informerd/informerd/internal/object"
)

// Queue is where the reflector puts changes: the delta FIFO.
type Queue interface {
	Add(*object.Object) error
	Update(*object.Object) error
	Delete(*object.Object) error
	Replace([]*object.Object, string) error
	Bookmark(rv string) error
}

// Signals are the lag signals of one reflector. Every field is safe to read
// concurrently with Run.
type Signals struct {
	// LastEvent is the unix-nano time of the last event or bookmark received.
	LastEvent atomic.Int64
	// LastResourceVersion is the last RV received.
	LastResourceVersion atomic.Value // string
	// Relists counts full lists (the first one included); WatchStarts counts
	// watch requests; Expired counts 410 Gone answers; Errors counts list
	// and watch failures of any kind.
	Relists, WatchStarts, Expired, Errors atomic.Int64
	// EncodeErrors and QueueErrors count changes from the API server that
	// could not be encoded or queued, by watch or by list; each is
	// recovered by listing again.
	EncodeErrors, QueueErrors atomic.Int64
	// LastError is the text of the most recent list/watch error or missed
	// change; cleared by the next change queued.
	LastError atomic.Value // string
}

// Reflector feeds one resource's queue from the API server. Run may be called
// once; Signals may be read at any time.
type Reflector struct {
	name    string
	lw      *cache.ListWatch
	client  any
	queue   Queue
	encoder *object.Encoder
	clock   clock.PassiveClock
	log     *slog.Logger
	signals Signals
	watches sync.WaitGroup // goroutines of observed watches
	gap     gap
	// indexFailures logs objects an index fails on.
	indexFailures indexFailures
	resume        resumeState
	// listed is told by the next Replace: the streaming list of the watch
	// that made it has been stored, or not (see streamHooks.listed).
	listed atomic.Pointer[listSignal]
	// caughtUp is the resourceVersion of the last bookmark a streamWatch
	// made to tell client-go's Reflector how far it applied; the store
	// skips it (see caughtUpTo).
	caughtUp atomic.Pointer[string]
	// backoff spaces the lists and watches after a failure (retry.go).
	backoff *backoff.Backoff
}

// Options configure a Reflector.
type Options struct {
	// Name labels logs and errors, e.g. "pods".
	Name string
	// Client is the client behind lw; client-go asks it whether it supports
	// streaming lists.
	Client any
	Log    *slog.Logger
	Clock  clock.PassiveClock
	// Resume is the resourceVersion of a cache restored from disk: the
	// reflector asks the API server for the changes after it instead of
	// listing (see resumeState). Empty: list first.
	Resume string
	// OnConfirmed is called once, when the API server has accepted the
	// resumed watch (its first event, or confirmAfter without an error)
	// or a list has replaced the restored cache. Unused without Resume.
	OnConfirmed func()
	// OnForeign is called, once, when the API server lists at a
	// resourceVersion older than Resume: the restored cache belongs to
	// another etcd history and must not be served. Unused without Resume.
	OnForeign func(error)
	// Backoff spaces the lists and watches that follow a failure; the
	// zero value is backoff.Default.
	Backoff backoff.Policy
}

// New returns a reflector that lists and watches through lw, encodes with
// encoder and writes into queue.
func New(lw *cache.ListWatch, encoder *object.Encoder, queue Queue, opts Options) *Reflector {
	r := &Reflector{name: opts.Name, lw: lw, client: opts.Client, queue: queue, encoder: encoder, clock: opts.Clock, log: opts.Log}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.indexFailures.log = r.log
	r.backoff = backoff.New(opts.Backoff)
	r.resume.rv, r.resume.confirm, r.resume.foreign = opts.Resume, opts.OnConfirmed, opts.OnForeign
	r.resume.from, _ = object.ParseRV(opts.Resume)
	r.signals.LastResourceVersion.Store("")
	r.signals.LastError.Store("")
	return r
}

// Signals returns the reflector's lag signals.
func (r *Reflector) Signals() *Signals { return &r.signals }

// Run lists and watches until ctx is done, retrying after failures as
// Options.Backoff says (retry.go). It returns when its goroutines have
// exited.
func (r *Reflector) Run(ctx context.Context) {
	open := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		if err := r.backoff.Wait(ctx); err != nil {
			return nil, err
		}
		r.signals.WatchStarts.Add(1)
		w, err := r.lw.WatchFuncWithContext(ctx, opts)
		if err != nil {
			r.observeError(err)
			return nil, err
		}
		r.backoff.Healthy() // admitted
		streamingList := opts.SendInitialEvents != nil && *opts.SendInitialEvents
		end := r.gap.watchEnd(streamingList)
		observe := func(ev watch.Event) {
			if ev.Type == watch.Error {
				r.observeError(apierrors.FromObject(ev.Object))
			}
		}
		onEmpty := func() {
			r.observeError(errors.New("the watch closed at once without an event: the API server is unreachable or dropped the connection"))
		}
		if sw, ok := w.(*streamWatch); ok {
			hooks := streamHooks{
				end: end, observe: observe, onEmpty: onEmpty,
				onUndecodable: func(err error) { r.missed(ReasonEncode, err) },
				apply:         r.apply,
				caughtUp:      r.caughtUpTo,
			}
			if streamingList {
				hooks.listed = newListSignal()
				r.listed.Store(hooks.listed)
			}
			sw.start(&r.watches, hooks)
			return sw, nil
		}
		return observeWatch(ctx, w, &r.watches, end, observe, onEmpty), nil
	}
	observed := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if rv := r.resume.take(); rv != "" {
				// client-go watches from rv next.
				l := &object.RawList{}
				l.ResourceVersion = rv
				return l, nil
			}
			if err := r.backoff.Wait(ctx); err != nil {
				return nil, err
			}
			obj, err := r.lw.ListWithContextFunc(ctx, opts)
			r.observeError(err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				if rv := r.resume.take(); rv != "" {
					return r.newResumeWatch(ctx, rv, open), nil
				}
			}
			return open(ctx, opts)
		},
	}
	lw := cache.ToListWatcherWithWatchListSemantics(observed, r.client)
	logger := klog.FromContext(ctx)
	cr := cache.NewReflectorWithOptions(lw, &object.Raw{}, (*store)(r), cache.ReflectorOptions{
		Name:   r.name,
		Logger: &logger,
		// The waits are r.backoff's; client-go's own only keeps a floor
		// (retry.go).
		Backoff: &wait.Backoff{Duration: clientGoFloor},
	})
	cr.RunWithContext(ctx)
	r.watches.Wait()
}

// apply stores a watch event a streamWatch read, as client-go's Reflector
// would: Add, Update, Delete or Bookmark.
func (r *Reflector) apply(ev watch.Event) {
	s := (*store)(r)
	switch ev.Type {
	case watch.Added:
		_ = s.Add(ev.Object)
	case watch.Modified:
		_ = s.Update(ev.Object)
	case watch.Deleted:
		_ = s.Delete(ev.Object)
	case watch.Bookmark:
		if u, ok := ev.Object.(*object.Raw); ok {
			_ = s.Bookmark(u.ResourceVersion)
		}
	}
}

// caughtUpTo is the bookmark at rv a streamWatch sends the Reflector,
// which watches again from its resourceVersion, after applying events up
// to rv itself. The store has them already: it skips this bookmark.
func (r *Reflector) caughtUpTo(rv string) watch.Event {
	r.caughtUp.Store(&rv)
	return watch.Event{Type: watch.Bookmark, Object: bookmarkAt(rv)}
}

// observeError records a list or watch failure; client-go's Reflector
// handles it (backoff, relist on 410) and logs it.
func (r *Reflector) observeError(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.backoff.Failed()
	r.signals.Errors.Add(1)
	r.signals.LastError.Store(err.Error())
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		r.signals.Expired.Add(1)
	}
}

// received records a change, bookmark or list at rv as queued.
func (r *Reflector) received(rv string) {
	r.backoff.Healthy()
	r.resume.confirmed()
	r.signals.LastEvent.Store(r.clock.Now().UnixNano())
	if e, _ := r.signals.LastError.Load().(string); e != "" {
		r.signals.LastError.Store("") // events flow again
	}
	if rv != "" {
		r.signals.LastResourceVersion.Store(rv)
	}
}

// LastEventTime returns when the last event or bookmark arrived (zero if none).
func (s *Signals) LastEventTime() time.Time {
	n := s.LastEvent.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Progress queues a bookmark at rv, as if the API server had sent one: the
// caller has shown that the API server reached rv with no change to this
// resource after the cache's resourceVersion that is not already in the
// queue or the cache (a watch from it that carried none before a bookmark
// at rv). So the cache moves to rv, in order after what is queued; a
// bookmark not ahead of the cache changes nothing. It is refused (false)
// while a gap is open: the cache then lacks a change, and rv would pass
// it.
func (r *Reflector) Progress(rv string) bool {
	if r.gap.open() {
		return false
	}
	return r.queue.Bookmark(rv) == nil
}
