package kubeapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// withPresentation indents JSON answers where the API server does:
//
//   - pretty=true, or a curl, Wget or browser User-Agent, indents every JSON
//     answer but a watch's events (its negotiation picks the pretty
//     serializer; watch streams have none);
//   - a failure's Status, when the request's Accept names no plain
//     representation (only a Table, say), is written by its responsewriters'
//     WriteRawJSON fallback, which indents.
//
// Such an answer is buffered whole and indented as json.MarshalIndent
// does; every other answer passes through untouched.
func withPresentation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pretty, plain := isPrettyPrint(r), acceptsPlain(r.Header.Get("Accept"))
		if !pretty && plain {
			next.ServeHTTP(w, r)
			return
		}
		iw := &indentWriter{ResponseWriter: w, pretty: pretty, plain: plain, watch: factsOf(r).info.Verb == "watch"}
		next.ServeHTTP(iw, r)
		iw.finish()
	})
}

// isPrettyPrint is the API server's negotiation.isPrettyPrint.
func isPrettyPrint(r *http.Request) bool {
	if strings.Contains(r.URL.RawQuery, "pretty") {
		if pp := r.URL.Query().Get("pretty"); len(pp) > 0 {
			pretty, _ := strconv.ParseBool(pp)
			return pretty
		}
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// acceptsPlain reports whether accept has a clause the API server's
// negotiation takes for a Status: a media type it serves (or a wildcard)
// without an as= conversion. An empty header accepts JSON.
func acceptsPlain(accept string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil || params["as"] != "" {
			continue
		}
		switch mt {
		case "*/*", "application/*", "application/json", "application/yaml",
			"application/vnd.kubernetes.protobuf", "application/cbor":
			return true
		}
	}
	return false
}

// indentWriter buffers and indents a JSON answer that withPresentation
// chose, from the status and Content-Type it is written with.
type indentWriter struct {
	http.ResponseWriter
	pretty, plain, watch bool

	code   int
	indent bool
	buf    bytes.Buffer
}

func (w *indentWriter) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	w.code = code
	isJSON := w.Header().Get("Content-Type") == "application/json"
	failed := code >= http.StatusBadRequest
	w.indent = isJSON && ((failed && (w.pretty || !w.plain)) || (!failed && w.pretty && !w.watch))
	if !w.indent {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *indentWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.indent {
		return w.ResponseWriter.Write(b)
	}
	return w.buf.Write(b)
}

// finish writes a buffered answer, indented.
func (w *indentWriter) finish() {
	if !w.indent {
		return
	}
	var out bytes.Buffer
	body := w.buf.Bytes()
	if json.Indent(&out, body, "", "  ") == nil {
		body = out.Bytes() // MarshalIndent ends without a newline
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.code)
	_, _ = w.ResponseWriter.Write(body)
}

// Unwrap lets http.ResponseController reach the connection (a watch
// flushes through it).
func (w *indentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
