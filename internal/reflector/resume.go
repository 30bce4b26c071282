package reflector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// A reflector that resumes (Options.Resume) starts from a cache restored
// from disk at a resourceVersion, and asks the API server only for the
// changes after it. client-go's Reflector always starts with a list, so
// the reflector answers its first list itself, with nothing, at the
// restored resourceVersion:
//   - a streaming list (the first Watch, sendInitialEvents=true) gets a
//     resumeWatch: the bookmark that ends the initial events at once, then
//     the API server's watch from the resourceVersion;
//   - a plain list gets an empty list, after which client-go itself
//     watches from the resourceVersion.
//
// Either way the store's Replace of that empty list is skipped: the cache
// already holds the objects. When the API server can no longer resume from
// the resourceVersion (410 Expired, or a resourceVersion it does not have
// yet), the resumeWatch ends with that error and client-go lists again;
// the list is diffed against the restored cache as any relist is.

// resumeState is the reflector's resume: the resourceVersion to resume
// from until the first list is answered, and whether the restored Replace
// is still to be skipped.
type resumeState struct {
	mu      sync.Mutex
	rv      string // answered by the first list; "" after it
	skip    string // the Replace to skip: its resourceVersion
	confirm func()
	once    sync.Once
	// foreignOnce guards foreign.
	foreignOnce sync.Once
	// from is the restored resourceVersion; foreign is told when a list
	// is older than it.
	from    uint64
	foreign func(error)
}

// checkList refuses a list older than the restored resourceVersion. The
// API server's lists are consistent reads, never older than what it has
// sent before; a list older than the restored cache means the state was
// written against another etcd history (etcd restored from a backup, a
// cluster rebuilt behind the same address and CA), whose resourceVersions
// cannot be ordered with the API server's. foreign is told, once.
func (s *resumeState) checkList(rv string) error {
	n, ok := object.ParseRV(rv)
	if s.from == 0 || !ok || n >= s.from {
		return nil
	}
	err := fmt.Errorf("the API server listed at resourceVersion %d, older than the restored state's %d: the state belongs to another etcd history", n, s.from)
	if s.foreign != nil {
		s.foreignOnce.Do(func() { s.foreign(err) })
	}
	return err
}

// take returns the resourceVersion to resume from, once.
func (s *resumeState) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.rv
	s.rv, s.skip = "", rv
	return rv
}

// skipReplace reports whether a Replace of list at rv is the answer to the
// resumed first list, once.
func (s *resumeState) skipReplace(list []any, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skip == "" || rv != s.skip || len(list) != 0 {
		s.skip = ""
		return false
	}
	s.skip = ""
	return true
}

// confirmed says the API server has taken the resume, or a list replaced
// the restored cache.
func (s *resumeState) confirmed() {
	if s.confirm != nil {
		s.once.Do(s.confirm)
	}
}

// confirmAfter is how long a resumed watch may stay open without an event
// before it counts as accepted: the API server refuses a resourceVersion it
// cannot resume from at once.
const confirmAfter = 3 * time.Second

// resumeWatch is the answer to the first streaming list of a resumed
// reflector: the initial-events-end bookmark at rv, then the API server's
// watch from rv, opened again after every end until the API server refuses
// rv or Stop is called. open spaces the attempts after a failure (the
// reflector's backoff, retry.go).
type resumeWatch struct {
	out     chan watch.Event
	stop    chan struct{}
	once    sync.Once
	open    func(context.Context, metav1.ListOptions) (watch.Interface, error)
	confirm func()
}

func (r *Reflector) newResumeWatch(ctx context.Context, rv string, open func(context.Context, metav1.ListOptions) (watch.Interface, error)) *resumeWatch {
	w := &resumeWatch{out: make(chan watch.Event), stop: make(chan struct{}), open: open, confirm: r.resume.confirmed}
	r.watches.Go(func() { w.loop(ctx, rv) })
	return w
}

func (w *resumeWatch) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// ResultChan implements watch.Interface.
func (w *resumeWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface; it may be called more than once.
func (w *resumeWatch) Stop() { w.once.Do(func() { close(w.stop) }) }

func (w *resumeWatch) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
	case <-ctx.Done():
	}
	return false
}

func (w *resumeWatch) loop(ctx context.Context, rv string) {
	defer close(w.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if !w.send(ctx, watch.Event{Type: watch.Bookmark, Object: initialEventsEnd(rv)}) {
		return
	}
	for ctx.Err() == nil && !w.stopped() {
		next, err := w.follow(ctx, rv)
		if next != "" {
			rv = next
		}
		if err != nil && refused(err) {
			w.send(ctx, watch.Event{Type: watch.Error, Object: statusOf(err)})
			return
		}
	}
}

// follow opens the API server's watch from rv and forwards its events
// until it ends. It returns the last resourceVersion seen and the error
// that ended it (an ERROR event's included).
func (w *resumeWatch) follow(ctx context.Context, rv string) (last string, err error) {
	timeout := int64((5*time.Minute + time.Duration(rand.Int64N(int64(5*time.Minute)))).Seconds())
	in, err := w.open(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		return "", err
	}
	defer in.Stop()
	accepted := time.NewTimer(confirmAfter)
	defer accepted.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, nil
		case <-accepted.C:
			w.confirm()
		case ev, ok := <-in.ResultChan():
			if !ok {
				return last, nil
			}
			if ev.Type == watch.Error {
				return last, apierrors.FromObject(ev.Object)
			}
			if m, ok := ev.Object.(metav1.Object); ok && m.GetResourceVersion() != "" {
				last = m.GetResourceVersion()
			}
			w.confirm()
			if !w.send(ctx, ev) {
				return last, nil
			}
		}
	}
}

// refused reports whether the API server cannot resume from the
// resourceVersion: it was compacted (410), is ahead of what it has, or the
// resource is gone (404: its CRD was removed while informerd was down).
// client-go then lists, as after any of these.
func refused(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsNotFound(err) || tooLarge(err)
}

// tooLarge reports whether the API server answered that it does not have
// the resourceVersion yet; servers before 1.18.6 said so only in the
// message, which client-go also matches.
func tooLarge(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) ||
		apierrors.IsTimeout(err) && strings.Contains(err.Error(), "Too large resource version")
}

func statusOf(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return &st
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: err.Error()}
}

// bookmarkAt is a bookmark's object at rv.
func bookmarkAt(rv string) *object.Raw {
	r, err := object.ParseRaw(fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q}}`, rv))
	if err != nil {
		panic(err) // a constant document
	}
	return r
}

// initialEventsEnd is the bookmark that ends a streaming list's initial
// events at rv.
func initialEventsEnd(rv string) *object.Raw {
	r, err := object.ParseRaw(fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:"true"}}}`, rv, metav1.InitialEventsAnnotationKey))
	if err != nil {
		panic(err) // a constant document
	}
	return r
}
