package kubeapi

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/features"
)

// gzipThreshold is the API server's defaultGzipThresholdBytes: a smaller
// answer is sent as it is.
const gzipThreshold = 128 << 10

// gzipWriters are gzip writers at the API server's level (1: the least CPU
// for a ratio close to the best), from klauspost/compress: the same gzip
// format as compress/gzip's at a fraction of its CPU, which matters most
// for WatchList streams, compressed per flush, so per event.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// withCompression gzips answers as the API server does when the client
// sends Accept-Encoding: gzip: a get's or list's answer once it passes 128
// KiB (APIResponseCompression), and a WatchList's stream, one gzip member
// per flush (WatchListCompression); other watches, and smaller answers,
// are sent as they are. Both gates are on by default in v1.37.
// Options.DisableCompression turns it off: for a sidecar on loopback it
// only costs CPU.
func (h *Handler) withCompression(next http.Handler) http.Handler {
	if h.opts.DisableCompression {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := factsOf(r)
		if f.kind != kindCached || responsewriters.ContentEncodingSupported(r, features.APIResponseCompression) != "gzip" {
			next.ServeHTTP(w, r)
			return
		}
		switch f.info.Verb {
		case "get", "list":
			dw := &deferredGzip{ResponseWriter: w}
			next.ServeHTTP(dw, r)
			dw.close()
		case "watch":
			if !isWatchList(r) {
				next.ServeHTTP(w, r)
				return
			}
			fw := &flushGzip{ResponseWriter: w}
			f.gzip = fw
			next.ServeHTTP(fw, r)
			f.gzip = nil
			_ = fw.FlushError()
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// isWatchList reports whether r is a WatchList request (sendInitialEvents
// and allowWatchBookmarks), the only watch the API server compresses.
func isWatchList(r *http.Request) bool {
	q := r.URL.Query()
	initial, _ := strconv.ParseBool(q.Get("sendInitialEvents"))
	bookmarks, _ := strconv.ParseBool(q.Get("allowWatchBookmarks"))
	return initial && bookmarks
}

// deferredGzip holds an answer until it passes gzipThreshold, then sends
// it compressed; a smaller one is sent as it is by close (the API server's
// deferredResponseWriter).
type deferredGzip struct {
	http.ResponseWriter
	code int
	buf  []byte
	gw   *gzip.Writer
	sent bool
}

func (d *deferredGzip) WriteHeader(code int) {
	if d.code == 0 {
		d.code = code
	}
}

func (d *deferredGzip) Write(p []byte) (int, error) {
	if d.code == 0 {
		d.code = http.StatusOK
	}
	if d.gw != nil {
		return d.gw.Write(p)
	}
	if d.sent {
		return d.ResponseWriter.Write(p)
	}
	d.buf = append(d.buf, p...)
	if len(d.buf) <= gzipThreshold {
		return len(p), nil
	}
	h := d.Header()
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	h.Del("Content-Length")
	d.ResponseWriter.WriteHeader(d.code)
	d.gw = gzipWriters.Get().(*gzip.Writer)
	d.gw.Reset(d.ResponseWriter)
	buf := d.buf
	d.buf = nil
	if _, err := d.gw.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// close sends what is held, or ends the compressed stream.
func (d *deferredGzip) close() {
	if d.gw != nil {
		_ = d.gw.Close()
		d.gw.Reset(nil)
		gzipWriters.Put(d.gw)
		d.gw = nil
		return
	}
	if d.sent || d.code == 0 {
		return
	}
	d.sent = true
	d.ResponseWriter.WriteHeader(d.code)
	_, _ = d.ResponseWriter.Write(d.buf)
}

// flushGzip compresses a watch stream that starts with 200, one gzip
// member per flush, so each flush reaches the client whole (the API
// server's perFlushGzipWriter). An answer with another status (an error
// before the stream) is sent as it is.
type flushGzip struct {
	http.ResponseWriter
	on bool
	gw *gzip.Writer
	// frame and member are a shared frame and its gzip member, both kept
	// in forms (offer): the next Write of frame itself (the same bytes,
	// not a copy, so that no writer between has changed them) that
	// starts a member sends member instead of compressing the frame
	// again.
	frame, member []byte
}

// offer tells f that member is frame's whole gzip member, as a flush of
// frame alone would compress it (gzipMember): the Write of frame that
// follows, when it starts a member, sends member. Every watcher of one
// event and encoding then shares one compression of it, as they share the
// frame.
func (f *flushGzip) offer(frame, member []byte) { f.frame, f.member = frame, member }

// starting reports whether the next Write starts a gzip member: nothing
// is waiting to be compressed since the last flush.
func (f *flushGzip) starting() bool { return f.on && f.gw == nil }

func (f *flushGzip) WriteHeader(code int) {
	if code == http.StatusOK {
		f.on = true
		f.Header().Set("Content-Encoding", "gzip")
		f.Header().Add("Vary", "Accept-Encoding")
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *flushGzip) Write(p []byte) (int, error) {
	if !f.on {
		return f.ResponseWriter.Write(p)
	}
	frame, member := f.frame, f.member
	f.frame, f.member = nil, nil
	if f.gw == nil && member != nil && len(p) == len(frame) && len(p) > 0 && unsafe.SliceData(p) == unsafe.SliceData(frame) {
		// A member of its own, ended: the flush that follows has nothing
		// to compress, and a Write before it starts the next member.
		if _, err := f.ResponseWriter.Write(member); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if f.gw == nil {
		f.gw = gzipWriters.Get().(*gzip.Writer)
		f.gw.Reset(f.ResponseWriter)
	}
	return f.gw.Write(p)
}

// FlushError ends the current gzip member and flushes it to the client;
// http.ResponseController calls it. The member's data is sync-flushed
// before its final block, so a reader has all of it before it waits for
// the next member's header (Go's gzip.Reader returns the data of a
// member's final block only once the next member starts).
func (f *flushGzip) FlushError() error {
	if f.gw != nil {
		err := errors.Join(f.gw.Flush(), f.gw.Close())
		f.gw.Reset(nil)
		gzipWriters.Put(f.gw)
		f.gw = nil
		if err != nil {
			return err
		}
	}
	return http.NewResponseController(f.ResponseWriter).Flush()
}

// gzipMember compresses frame into one gzip member, as flushGzip does a
// flush that holds frame alone: the same bytes.
func gzipMember(frame []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(frame)/2 + 64)
	gw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(gw)
	gw.Reset(&b)
	_, err := gw.Write(frame)
	err = errors.Join(err, gw.Flush(), gw.Close())
	gw.Reset(nil)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (f *flushGzip) Unwrap() http.ResponseWriter { return f.ResponseWriter }
