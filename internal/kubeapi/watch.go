package kubeapi

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/kubeproto"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// Watch timing, as the API server's defaults: a watch without
// timeoutSeconds ends after a random 30 to 60 minutes (--min-request-timeout
// 1800s), and a quiet watch that allows bookmarks gets one a minute.
const (
	minWatchTimeout = 30 * time.Minute
	idleBookmark    = time.Minute
)

// watch streams a watch's events as the API server's JSON watch events.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request, f *facts) {
	res, ns, info := f.res, f.namespace, f.info
	opts, err := listOptions(r.URL.Query(), true)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	if info.Name != "" {
		// A watch of one object: the API server turns the name into a
		// field selector.
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if n, ok := opts.FieldSelector.RequiresExactMatch(fieldName); !ok || n != info.Name {
				writeStatus(w, badRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
		}
		opts.FieldSelector = fields.OneTermEqualSelector(fieldName, info.Name)
	}
	sel, err := newSelector(opts, ns, h.fieldsFor(r.Context(), res), res.Cache().IndexNames(), res.IndexFields())
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	if n := h.watches.Add(1); n > int64(h.opts.MaxWatches) {
		h.watches.Add(-1)
		writeStatus(w, tooMany(fmt.Sprintf("too many watches: informerd's limit of %d open watches is reached; retry later or use another replica", h.opts.MaxWatches)))
		return
	}
	defer h.watches.Add(-1)
	select {
	case <-h.stopping:
		writeStatus(w, unavailable("informerd is shutting down; watch again (on another replica)"))
		return
	default:
	}

	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if err := h.reach(r.Context(), res, ns, opts.ResourceVersion); err != nil {
		h.fail(w, r, err)
		return
	}
	wopts := fanout.WatchOptions{
		Selection:         sel.sel,
		SendInitialEvents: initial,
		AllowBookmarks:    opts.AllowWatchBookmarks,
	}
	if !initial && opts.ResourceVersion != "0" {
		wopts.ResourceVersion = opts.ResourceVersion
	}
	watcher, items, at, err := res.Hub().Watch(wopts)
	ew := &eventWriter{h: h, res: res, rc: http.NewResponseController(w), out: f.out}
	if f.out.as == asTable {
		ew.cols = h.columns.get(r.Context(), res.Resolved().GVR)
	}
	w.Header().Set("Content-Type", "application/json")
	if f.out.media == mediaProtobuf {
		w.Header().Set("Content-Type", contentTypeProtobufWatch)
	}
	w.WriteHeader(http.StatusOK)
	ew.b = bufio.NewWriterSize(w, 32<<10)
	if err != nil {
		ew.end(err, opts.ResourceVersion)
		return
	}
	defer watcher.Close()
	h.opts.Observer.WatchStarted(res.Name())
	defer h.opts.Observer.WatchEnded(res.Name())

	timeout := minWatchTimeout + rand.N(minWatchTimeout)
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		// 0 is the default, as at the API server (ListResource).
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	idle := time.NewTimer(idleBookmark)
	defer idle.Stop()

	if !ew.write(items) {
		return
	}
	if initial && opts.AllowWatchBookmarks {
		if !ew.bookmark(at, true) {
			return
		}
	}
	if !ew.flush() {
		return
	}
	for {
		items, err := watcher.Poll()
		if err != nil {
			ew.end(err, watcher.SentResourceVersion())
			return
		}
		if len(items) == 0 {
			select {
			case <-watcher.Ready():
				continue
			case <-idle.C:
				idle.Reset(idleBookmark)
				it, ok := watcher.IdleBookmark()
				if !ok {
					continue
				}
				items = []fanout.Item{it}
			case <-deadline.C:
				return // a clean end: the client watches again from its last resourceVersion
			case <-h.stopping:
				return
			case <-r.Context().Done():
				return
			}
		}
		if !ew.write(items) || !ew.flush() {
			return
		}
		idle.Reset(idleBookmark)
	}
}

// eventWriter writes watch events, each on its own line, and flushes them
// to the client.
type eventWriter struct {
	h    *Handler
	res  pipeline.Served
	b    *bufio.Writer
	rc   *http.ResponseController
	out  *output
	cols *columns
	// headed: an event has been written, so a Table's columns have been
	// sent.
	headed bool
	failed bool
}

func (e *eventWriter) write(items []fanout.Item) bool {
	if e.out.as == asNothing && len(items) > 0 {
		e.failed = true
	}
	for _, it := range items {
		if it.Type == watch.Bookmark {
			if !e.bookmark(it.ResourceVersion, false) {
				return false
			}
			continue
		}
		if e.out.media == mediaProtobuf {
			e.protoEvent(string(it.Type), it.Object, nil)
			continue
		}
		var obj []byte
		if e.out.as == asTable {
			// The API server's watch encoder: the columns in the first
			// event only, each event's metadata at its object's
			// resourceVersion.
			obj = e.h.tableJSON(e.cols, e.out.table, oneObject(it.Object), metav1.ListMeta{ResourceVersion: it.Object.ResourceVersion}, !e.headed)
		} else {
			obj = e.h.objectJSON(e.out, it.Object)
		}
		e.headed = true
		e.raw(string(it.Type), obj)
	}
	return !e.failed
}

// bookmark writes a BOOKMARK: an object of the resource's kind with only a
// resourceVersion, annotated k8s.io/initial-events-end after the initial
// events. In a Table watch it is a Table with that object as its one row,
// as the API server converts it; the row carries the object's metadata
// whatever includeObject asks when the annotation is set.
func (e *eventWriter) bookmark(rv string, end bool) bool {
	if e.out.as == asNothing {
		e.failed = true
	}
	gvr := e.res.Resolved().GVR
	meta := fmt.Sprintf(`{"resourceVersion":%q,"creationTimestamp":null}`, rv)
	if end {
		meta = fmt.Sprintf(`{"resourceVersion":%q,"creationTimestamp":null,"annotations":{%q:"true"}}`, rv, metav1.InitialEventsAnnotationKey)
	}
	obj := fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":%s}`, e.res.Resolved().Kind, gvr.GroupVersion().String(), meta)
	if e.out.media == mediaProtobuf {
		e.protoEvent(string(watch.Bookmark), nil, obj)
		return !e.failed
	}
	switch e.out.as {
	case asMetadata:
		obj, _ = partialObjectMetadata(obj, e.out.metaGV.String())
	case asTable:
		t := e.out.table
		if end && t.include == metav1.IncludeNone {
			t.include = metav1.IncludeMetadata
		}
		obj = e.h.tableJSON(e.cols, t, oneObject(&object.Object{ResourceVersion: rv, JSON: obj}), metav1.ListMeta{ResourceVersion: rv}, !e.headed)
	}
	e.headed = true
	e.raw(string(watch.Bookmark), obj)
	return !e.failed
}

func (e *eventWriter) raw(typ string, obj []byte) {
	if e.failed {
		return
	}
	_, _ = e.b.WriteString(`{"type":"`)
	_, _ = e.b.WriteString(typ)
	_, _ = e.b.WriteString(`","object":`)
	_, _ = e.b.Write(obj)
	if _, err := e.b.WriteString("}\n"); err != nil {
		e.failed = true
	}
}

// protoEvent writes one protobuf watch event.
func (e *eventWriter) protoEvent(typ string, o *object.Object, bookmark []byte) {
	if e.failed {
		return
	}
	if _, err := e.h.writeProtoEvent(e.b, e.out, kindOf(e.res), typ, o, bookmark); err != nil {
		e.failed = true
	}
}

// frame writes one protobuf watch frame.
func (e *eventWriter) frame(b []byte) {
	if e.failed {
		return
	}
	if _, err := e.b.Write(b); err != nil {
		e.failed = true
	}
}

func (e *eventWriter) flush() bool {
	if e.failed || e.b.Flush() != nil || e.rc.Flush() != nil {
		e.failed = true
	}
	return !e.failed
}

// end writes the ERROR event that ends a watch the cache can no longer
// serve, as the API server does: 410 Expired when the resourceVersion has
// left the history window (the client lists again), else the matching
// Status.
func (e *eventWriter) end(err error, rv string) {
	var st *metav1.Status
	var tooSlow *fanout.TooSlowError
	switch {
	case errors.As(err, &tooSlow):
		st = expired(fmt.Sprintf("too old resource version: this watch fell behind informerd's history window after resourceVersion %s; list again", tooSlow.LastResourceVersion))
	case errors.Is(err, indexer.ErrTooOld):
		st = expired(fmt.Sprintf("too old resource version: %s (%d)", rv, e.res.Cache().Stats().HistoryFloor))
	case errors.Is(err, fanout.ErrClosed):
		return // informerd is stopping: the client watches again elsewhere
	default:
		st = asStatus(err)
	}
	if e.out.media == mediaProtobuf {
		e.frame(kubeproto.WatchFrame(string(watch.Error), kubeproto.Status(st)))
	} else {
		e.raw(string(watch.Error), statusJSON(st))
	}
	e.flush()
}
