package kubeapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/kubeproto"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// A watch writes each event that comes alone (the fan-out of a live
// event: each watcher polls it by itself) as its whole frame in one Write,
// and the frame is the same bytes for every watcher of the event and
// encoding: built once, kept in forms (eventFrame), as the API server's
// cachingObject keeps a watch event's encoding per event type and
// encoder. A batch of events (initial events, a replay, a watcher behind
// the stream) is copied instead, as pieces of shared bytes, into a
// buffer borrowed for the batch, so that a batch is written in large
// writes and its frames, read by one watcher, are not kept. A watcher's
// own are only its bookmarks (its resourceVersion), a Table watch's first
// event (the column definitions) and the ERROR that ends it.
var (
	jsonHeadAdded    = []byte(`{"type":"ADDED","object":`)
	jsonHeadModified = []byte(`{"type":"MODIFIED","object":`)
	jsonHeadDeleted  = []byte(`{"type":"DELETED","object":`)
	jsonHeadBookmark = []byte(`{"type":"BOOKMARK","object":`)
	jsonHeadError    = []byte(`{"type":"ERROR","object":`)
	jsonTail         = []byte("}\n")
)

// batchBuffers are the buffers batches are written through: 32 KiB, as
// large as net/http's own writes to the connection.
var batchBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// jsonHead is what a JSON watch frame of typ puts before its object.
func jsonHead(typ watch.EventType) []byte {
	switch typ {
	case watch.Added:
		return jsonHeadAdded
	case watch.Modified:
		return jsonHeadModified
	case watch.Deleted:
		return jsonHeadDeleted
	case watch.Bookmark:
		return jsonHeadBookmark
	case watch.Error:
		return jsonHeadError
	}
	return []byte(`{"type":"` + string(typ) + `","object":`)
}

// appendJSONFrame appends the JSON watch frame of an event of typ with obj.
func appendJSONFrame(b []byte, typ watch.EventType, obj []byte) []byte {
	b = append(b, jsonHead(typ)...)
	b = append(b, obj...)
	return append(b, jsonTail...)
}

// eventCode numbers the event types a frame kept in forms may have; 0 for
// the others, which are not kept.
func eventCode(typ watch.EventType) uint8 {
	switch typ {
	case watch.Added:
		return 1
	case watch.Modified:
		return 2
	case watch.Deleted:
		return 3
	}
	return 0
}

// eventFrame returns the whole frame of an event of typ with o in the
// encoding out asks for (not a Table), kept in forms for every watcher of
// that encoding, and its key there; nil when it is not kept (an event
// type forms do not key, an object that cannot be encoded in protobuf).
func (h *Handler) eventFrame(out *output, kind schema.GroupVersionKind, typ watch.EventType, o *object.Object) ([]byte, formKey) {
	code := eventCode(typ)
	if code == 0 {
		return nil, formKey{}
	}
	if out.media == mediaProtobuf {
		k := formKey{o: o, f: out.protoObjectForm(), event: code}
		b, err := h.forms.keep(k, func() ([]byte, error) {
			obj, err := h.protoObject(out, kind, o)
			if err != nil {
				return nil, err
			}
			b := kubeproto.AppendWatchFrameHeader(make([]byte, 0, 32+len(obj)), string(typ), obj)
			return append(b, obj...), nil
		})
		if err != nil {
			return nil, formKey{}
		}
		return b, k
	}
	k := formKey{o: o, f: out.form(), event: code}
	b, _ := h.forms.keep(k, func() ([]byte, error) {
		obj, err := h.objectJSON(out, o)
		if err != nil {
			return nil, err
		}
		return appendJSONFrame(make([]byte, 0, len(jsonHeadModified)+len(obj)+len(jsonTail)), typ, obj), nil
	})
	return b, k
}

// tableSecond is the time a Table watch's events printed at now are
// printed at: its second, so that every watcher that writes an event in
// that second shares one frame, and the frame is the same whichever of
// them prints it. Ages are printed to the second.
func tableSecond(now time.Time) time.Time { return time.Unix(now.Unix(), 0) }

// tableFrame returns the JSON watch frame of an event of typ with o as a
// Table of one row without column definitions, with cols and t's
// includeObject, printed at the second at: kept in forms, one for every
// watcher of those columns and options in that second.
func (h *Handler) tableFrame(cols *columns, t tableOptions, typ watch.EventType, o *object.Object, at time.Time) []byte {
	encode := func() ([]byte, error) {
		obj := h.tableJSON(cols, t, oneObject(o), metav1.ListMeta{ResourceVersion: o.ResourceVersion}, false, at)
		return appendJSONFrame(make([]byte, 0, len(obj)+len(jsonHeadModified)+len(jsonTail)), typ, obj), nil
	}
	k := formKey{o: o, f: formTableMetadata, event: eventCode(typ), at: at.Unix()}
	if k.event == 0 {
		b, _ := encode()
		return b
	}
	switch t.include {
	case metav1.IncludeNone:
		k.f = formTableNone
	case metav1.IncludeObject:
		k.f = formTableObject
	}
	if cols.printer != nil {
		k.printer = cols.printer
	} else {
		k.cols = cols
	}
	b, _ := h.forms.keep(k, encode)
	return b
}

// eventWriter writes a watch's events to its response, each on its own
// line (JSON) or in its own frame (protobuf), as the pieces every watcher
// of the event shares, and flushes them to the client. It belongs to the
// watch's goroutine.
type eventWriter struct {
	h    *Handler
	res  pipeline.Served
	kind schema.GroupVersionKind
	// w is where events are written: resp, or while a batch is written
	// the buffer it borrowed.
	w    io.Writer
	resp io.Writer
	rc   *http.ResponseController
	out  *output
	cols *columns
	// gzip is the compressed WatchList's writer, nil for another watch.
	gzip *flushGzip
	// hdr holds a protobuf frame's header while it is written.
	hdr [32]byte
	// headed: an event has been written, so a Table's columns have been
	// sent.
	headed bool
	failed bool
}

// newEventWriter writes the events of a watch of res in out to w.
func newEventWriter(h *Handler, res pipeline.Served, w http.ResponseWriter, out *output) *eventWriter {
	return &eventWriter{h: h, res: res, kind: kindOf(res), w: w, resp: w, rc: http.NewResponseController(w), out: out}
}

// write writes items: one event alone as its shared frame, a batch
// through a borrowed buffer. The caller flushes.
func (e *eventWriter) write(items []fanout.Item) bool {
	if e.out.as == asNothing && len(items) > 0 {
		e.failed = true
	}
	if len(items) > 1 && !e.failed {
		b := batchBuffers.Get().(*bufio.Writer)
		b.Reset(e.resp)
		e.w = b
		defer func() {
			if !e.failed && b.Flush() != nil {
				e.failed = true
			}
			b.Reset(nil)
			batchBuffers.Put(b)
			e.w = e.resp
		}()
	}
	for _, it := range items {
		if e.failed {
			break
		}
		switch {
		case it.Type == watch.Bookmark:
			e.bookmark(it.ResourceVersion, false)
		case e.out.as == asTable:
			e.tableEvent(it)
		case len(items) == 1 && e.shared(it):
		case e.out.media == mediaProtobuf:
			e.protoEvent(string(it.Type), it.Object, nil)
		default:
			obj, err := e.h.objectJSON(e.out, it.Object)
			if err != nil {
				e.failed = true // a damaged cold object: the watch ends
				break
			}
			e.json(it.Type, obj)
		}
	}
	return !e.failed
}

// shared writes an event's shared frame, if it is kept. A compressed
// WatchList about to start a gzip member is offered the frame's member,
// kept too, so that the event is compressed once for all its watchers of
// that encoding, not once each; a watcher whose flush holds more than
// the frame (rare: the event that ends the initial events is followed by
// the bookmark) sends it as a member of its own, which a gzip reader
// reads on as one stream.
func (e *eventWriter) shared(it fanout.Item) bool {
	b, k := e.h.eventFrame(e.out, e.kind, it.Type, it.Object)
	if b == nil {
		return false
	}
	if e.gzip != nil && e.gzip.starting() {
		k.gzip = true
		if m, err := e.h.forms.keep(k, func() ([]byte, error) { return gzipMember(b) }); err == nil {
			e.gzip.offer(b, m)
		}
	}
	e.put(b)
	return true
}

// tableEvent writes an event of a Table watch as the API server's watch
// encoder does: the columns in the first event only, each event's
// metadata at its object's resourceVersion. Every event after the first
// is a frame shared with the other watchers of the same columns.
func (e *eventWriter) tableEvent(it fanout.Item) {
	if err := readable(oneObject(it.Object)); err != nil {
		e.failed = true // a damaged cold object: the watch ends
		return
	}
	at := tableSecond(e.h.now())
	if e.headed {
		e.put(e.h.tableFrame(e.cols, e.out.table, it.Type, it.Object, at))
		return
	}
	e.headed = true
	e.json(it.Type, e.h.tableJSON(e.cols, e.out.table, oneObject(it.Object), metav1.ListMeta{ResourceVersion: it.Object.ResourceVersion}, true, at))
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
		obj = e.h.tableJSON(e.cols, t, oneObject((&object.Object{ResourceVersion: rv}).WithJSON(obj)), metav1.ListMeta{ResourceVersion: rv}, !e.headed, tableSecond(e.h.now()))
	}
	e.headed = true
	e.json(watch.Bookmark, obj)
	return !e.failed
}

// json writes one JSON watch frame in three writes, of which only obj is
// not a constant.
func (e *eventWriter) json(typ watch.EventType, obj []byte) {
	e.put(jsonHead(typ))
	e.put(obj)
	e.put(jsonTail)
}

// protoEvent writes one protobuf watch frame.
func (e *eventWriter) protoEvent(typ string, o *object.Object, bookmark []byte) {
	if e.failed {
		return
	}
	if _, err := e.h.writeProtoEvent(e.w, e.hdr[:0], e.out, e.kind, typ, o, bookmark); err != nil {
		e.failed = true
	}
}

// put writes b, which may be shared: the response neither changes nor
// keeps it.
func (e *eventWriter) put(b []byte) {
	if e.failed {
		return
	}
	if _, err := e.w.Write(b); err != nil {
		e.failed = true
	}
}

func (e *eventWriter) flush() bool {
	if e.failed || e.rc.Flush() != nil {
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
		e.put(kubeproto.WatchFrame(string(watch.Error), kubeproto.Status(st)))
	} else {
		e.json(watch.Error, statusJSON(st))
	}
	e.flush()
}
