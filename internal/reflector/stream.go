package reflector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buger/jsonparser"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// streamIdle ends a watch on which nothing, not even a bookmark, arrived
// for so long: the connection is presumed dead, and the Reflector watches
// again from its last resourceVersion. kube-apiserver sends a watch that
// asked for bookmarks one about every minute; over HTTP/2 client-go's
// PINGs would find a dead connection, over HTTP/1.1 nothing else does.
var streamIdle = 3 * time.Minute

// streamWatch is an API server watch read by informerd itself: one
// goroutine reads the response a line at a time and decodes each event into
// an object.Raw (the envelope split without parsing the object, the object
// copied once). It replaces client-go's StreamWatcher, its frame and event
// decoders and the observedWatch goroutine in front of them: the bytes are
// copied once where three copies were made.
//
// Given an apply hook (streamHooks), it also stores the watch's changes
// itself, on its goroutine, from the socket to the cache: client-go's
// Reflector sees only a bookmark at the last resourceVersion applied (the
// one to watch again from) before the watch's end or an error, which it
// is sent as before. Events during a streaming list go to the Reflector,
// which gathers them into one Replace. Per event, at a trickle of changes,
// no goroutine is woken besides the one the socket wakes.
//
// Its hooks are set by start before the first event; a streamWatch whose
// ResultChan is read without start runs without them.
type streamWatch struct {
	body  io.ReadCloser
	lines *lineReader
	outlet
	once sync.Once // Stop
	run  sync.Once // start

	wg *sync.WaitGroup
	streamHooks

	// prepare readies each object while the line it was read from is
	// valid (object.Encoder.Prepare); nil: the object is copied as it is.
	prepare func(*object.Raw)

	lastRead atomic.Int64 // unix nanoseconds
	idled    atomic.Bool  // closed by checkIdle
}

// streamHooks are what a streamWatch tells the Reflector, and how it
// stores changes itself. Every field may be nil.
type streamHooks struct {
	// end is closed when a change was missed: the watch ends with 410.
	end     <-chan struct{}
	observe func(watch.Event)
	// onEmpty is called when the watch closes within a second without an
	// event and without Stop.
	onEmpty func()
	// onUndecodable is called with an event that could not be decoded; it
	// is expected to close end (the change it held is missing).
	onUndecodable func(error)

	// apply stores an ADDED, MODIFIED, DELETED or BOOKMARK event as the
	// Reflector would (the store's Add, Update, Delete or Bookmark); nil:
	// every event goes to the Reflector.
	apply func(watch.Event)
	// listed, for a watch that starts with a streaming list, is told
	// once the Reflector has stored the list or failed to: after the
	// bookmark that ends the initial events has been sent, events are
	// applied only once it is stored, and the watch ends if it is not.
	// Nil: the watch applies from its first event.
	listed *listSignal
	// caughtUp returns the bookmark at rv sent to the Reflector after
	// events were applied, before the watch ends or sends anything else.
	caughtUp func(rv string) watch.Event
}

// listSignal tells a streamWatch what became of its streaming list: done
// is closed when the store's Replace of it returns, stored set before.
type listSignal struct {
	done   chan struct{}
	stored bool
}

func newListSignal() *listSignal { return &listSignal{done: make(chan struct{})} }

// tell sets stored and closes done.
func (l *listSignal) tell(stored bool) {
	l.stored = stored
	close(l.done)
}

func newStreamWatch(ctx context.Context, body io.ReadCloser, prepare func(*object.Raw)) *streamWatch {
	return &streamWatch{
		prepare: prepare,
		body:    body,
		lines:   &lineReader{src: body, br: bufio.NewReaderSize(body, 64<<10)},
		outlet:  newOutlet(ctx),
	}
}

// start sets the hooks and starts the reading goroutine, tracked by wg.
// Only the first call (or ResultChan's) starts it.
func (w *streamWatch) start(wg *sync.WaitGroup, hooks streamHooks) {
	w.run.Do(func() {
		w.wg, w.streamHooks = wg, hooks
		if w.apply != nil && w.caughtUp == nil {
			panic("streamWatch: apply without caughtUp")
		}
		if w.wg == nil {
			w.wg = &sync.WaitGroup{}
		}
		w.wg.Go(w.loop)
	})
}

// ResultChan implements watch.Interface.
func (w *streamWatch) ResultChan() <-chan watch.Event {
	w.start(nil, streamHooks{})
	return w.out
}

// Stop implements watch.Interface; it may be called more than once.
func (w *streamWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		_ = w.body.Close()
	})
}

func (w *streamWatch) loop() {
	defer close(w.out)
	defer func() { _ = w.body.Close() }()
	finished := make(chan struct{})
	defer close(finished)
	// A read waiting for the next event ends when the body closes: on a
	// missed change, or when the connection has been silent for too long.
	w.lastRead.Store(time.Now().UnixNano())
	idle := time.AfterFunc(streamIdle, w.checkIdle)
	defer idle.Stop()
	if w.end != nil {
		w.wg.Go(func() {
			select {
			case <-w.end:
				_ = w.body.Close()
			case <-finished:
			}
		})
	}

	start, events := time.Now(), 0
	// direct: events are applied here; applied: the resourceVersion of
	// the last one, which the Reflector has not been told.
	direct, applied := w.apply != nil && w.listed == nil, ""
	for {
		line, err := w.lines.nextLine()
		if w.ended() {
			w.endMissed(applied)
			return
		}
		if err != nil {
			if events == 0 && time.Since(start) < time.Second && !w.stopped() && w.onEmpty != nil {
				// client-go turns a connection that fails with EOF into an
				// empty watch too; the Reflector retries quietly. That is an
				// upstream problem worth reporting.
				w.onEmpty()
			}
			// The watch ends; the Reflector watches again from its
			// resourceVersion, as after client-go's StreamWatcher ends on a
			// read error. A failure other than the connection ending is
			// recorded as the upstream's last error.
			if !w.stopped() && !errors.Is(err, io.EOF) && !utilnet.IsProbableEOF(err) && w.observe != nil {
				w.observe(watch.Event{Type: watch.Error, Object: &metav1.Status{
					Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
					Message: w.readError(err),
				}})
			}
			w.catchUp(applied)
			return
		}
		w.lastRead.Store(time.Now().UnixNano())
		ev, err := decodeEvent(line, w.prepare)
		if err != nil {
			if w.onUndecodable == nil {
				if w.catchUp(applied) {
					w.send(watch.Event{Type: watch.Error, Object: &metav1.Status{
						Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
						Message: err.Error(),
					}}, "")
				}
				return
			}
			w.onUndecodable(err)
			continue // end is closed: the next turn sends the 410
		}
		events++
		if w.observe != nil {
			w.observe(ev)
		}
		if direct && ev.Type != watch.Error {
			if w.stopped() {
				return // client-go is done with this watch
			}
			w.apply(ev)
			if rv := ev.Object.(*object.Raw).ResourceVersion; rv != "" {
				applied = rv
			}
			continue
		}
		if !w.catchUp(applied) {
			return
		}
		applied = ""
		if !w.send(ev, "") || ev.Type == watch.Error {
			// client-go ends a watch that sent an ERROR, and goes on
			// without it: nothing after it may be applied.
			return
		}
		if w.apply != nil && !direct && ev.Type == watch.Bookmark && ev.Object.(*object.Raw).GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			// The Reflector stores the streaming list now; what follows
			// is applied here once it has.
			if !w.waitListed() {
				return
			}
			direct = true
		}
	}
}

// catchUp sends the Reflector the bookmark at applied, the resourceVersion
// of the last event applied, if any; false when the watch is over.
func (w *streamWatch) catchUp(applied string) bool {
	if applied == "" {
		return true
	}
	return w.send(w.caughtUp(applied), applied)
}

// endMissed ends the watch after a missed change: the bookmark at applied
// first, if any, so that the Reflector's next list is not older than what
// the watch applied, then the 410 that makes it list.
func (w *streamWatch) endMissed(applied string) {
	if applied != "" && !w.deliver(w.caughtUp(applied)) {
		return
	}
	w.sendMissed()
}

// waitListed waits until the Reflector has stored the streaming list;
// false when it failed to or the watch is over first. client-go, which
// then lists again without reading this watch, is sent nothing.
func (w *streamWatch) waitListed() bool {
	select {
	case <-w.listed.done:
		return w.listed.stored
	case <-w.stop:
	case <-w.done:
	case <-w.end:
	}
	return false
}

// send passes ev on; false when the watch is over. After a missed change
// it ends the watch instead (endMissed, with applied).
func (w *streamWatch) send(ev watch.Event, applied string) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
	case <-w.done:
	case <-w.end:
		w.endMissed(applied)
	}
	return false
}

// checkIdle closes the body of a watch on which nothing arrived for
// streamIdle, and otherwise checks again when that much time will have
// passed since the last read.
func (w *streamWatch) checkIdle() {
	since := time.Since(time.Unix(0, w.lastRead.Load()))
	if since >= streamIdle {
		w.idled.Store(true)
		_ = w.body.Close()
		return
	}
	if !w.stopped() {
		time.AfterFunc(streamIdle-since, w.checkIdle)
	}
}

func (w *streamWatch) readError(err error) string {
	if w.idled.Load() {
		return fmt.Sprintf("nothing arrived on the watch for %v, not even a bookmark: the connection is presumed dead; watching again", streamIdle)
	}
	return fmt.Sprintf("reading the watch stream: %v", err)
}

func (w *streamWatch) ended() bool {
	select {
	case <-w.end:
		return w.end != nil
	default:
		return false
	}
}

// missedStatus is a 410, as when the API server can no longer resume from
// a resourceVersion, which is informerd's case after a missed change.
func missedStatus() *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGone,
		Reason:  metav1.StatusReasonExpired,
		Message: "informerd did not cache a change of this watch; listing again to recover it",
	}
}

// eventPrefix starts every event kube-apiserver encodes: a WatchEvent's
// fields in their declared order, type then object.
var (
	eventPrefix = []byte(`{"type":"`)
	objectKey   = []byte(`","object":`)
)

// decodeEvent decodes one line of a JSON watch stream. The object is
// readied by prepare, or copied when prepare is nil; line is not kept.
func decodeEvent(line []byte, prepare func(*object.Raw)) (watch.Event, error) {
	typ, obj, err := splitEvent(line)
	if err != nil {
		return watch.Event{}, err
	}
	switch t := watch.EventType(typ); t {
	case watch.Error:
		s := &metav1.Status{}
		if err := json.Unmarshal(obj, s); err != nil {
			return watch.Event{}, fmt.Errorf("decode watch event: ERROR whose object is not a Status: %w", err)
		}
		return watch.Event{Type: t, Object: s}, nil
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		r, err := object.ParseRaw(obj)
		if err != nil {
			return watch.Event{}, fmt.Errorf("decode watch event %s: %w", t, err)
		}
		if prepare != nil && t != watch.Bookmark {
			prepare(r)
		} else {
			r.JSON = slices.Clone(r.JSON)
		}
		return watch.Event{Type: t, Object: r}, nil
	default:
		return watch.Event{}, fmt.Errorf("decode watch event: invalid type %q", typ)
	}
}

// splitEvent returns a watch event's type and its object's bytes, within
// line. kube-apiserver's events, {"type":"…","object":{…}} with a type of
// printable ASCII, are split without scanning the object; anything else is
// parsed as Kubernetes' serializer parses it (its strings are
// encoding/json's: escapes decoded, invalid UTF-8 replaced by U+FFFD).
func splitEvent(line []byte) (typ string, obj []byte, err error) {
	line = bytes.TrimSpace(line)
	if rest, ok := bytes.CutPrefix(line, eventPrefix); ok {
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.HasPrefix(rest[i:], objectKey) && len(rest) > i+len(objectKey)+2 && plainASCII(rest[:i]) {
			obj := bytes.TrimSpace(rest[i+len(objectKey) : len(rest)-1])
			if len(obj) >= 2 && obj[0] == '{' && obj[len(obj)-1] == '}' && line[len(line)-1] == '}' {
				return string(rest[:i]), obj, nil
			}
		}
	}
	var members map[string]json.RawMessage
	perr := json.Unmarshal(line, &members)
	if perr == nil {
		// A map's keys match exactly, as sigs.k8s.io/json's do; a struct's
		// would fold case.
		obj = bytes.TrimSpace(members["object"])
		if v, ok := members["type"]; ok {
			perr = json.Unmarshal(v, &typ)
		}
	}
	if perr != nil || typ == "" || len(obj) == 0 || obj[0] != '{' {
		return "", nil, fmt.Errorf("decode watch event: want {\"type\":…,\"object\":{…}} on one line, got %q (%v)", head(line), perr)
	}
	return typ, obj, nil
}

// plainASCII reports whether b is printable ASCII without a backslash: a
// JSON string's content that reads as itself.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// watchError is the error of a watch request the API server answered with
// a status other than 200, as client-go's REST client makes it.
func watchError(resp *http.Response, gr schema.GroupResource) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if kind, err := jsonparser.GetString(body, "kind"); err == nil && kind == "Status" {
		s := &metav1.Status{}
		if err := json.Unmarshal(body, s); err == nil {
			if s.Code == 0 {
				s.Code = int32(resp.StatusCode)
			}
			return &apierrors.StatusError{ErrStatus: *s}
		}
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, gr, "", string(body), 0, true)
}
