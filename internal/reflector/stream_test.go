package reflector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// TestSplitEventMatchesParser holds the envelope split's fast path to a
// JSON parser's reading of the same line, for kube-apiserver's events and
// for envelopes the fast path must not take.
func TestSplitEventMatchesParser(t *testing.T) {
	for _, line := range []string{
		`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5"}}}`,
		`{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"}\"{"}}}` + "\n",
		`  {"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"9"}}}  `,
		`{"object":{"kind":"Pod","metadata":{"name":"a"}},"type":"DELETED"}`,
		`{"type":"ERROR","object":{"kind":"Status","code":410}}`,
		`{ "type" : "ADDED" , "object" : {"kind":"Pod"} }`,
		`{"type":"ADD\"ED","object":{"kind":"Pod"}}`,
		`{"type":"A\u0044DED","object":{"kind":"Pod"}}`,
		"{\"type\":\"\xe5\",\"object\":{}}",
		`{"type":"\ud800","object":{}}`,
	} {
		typ, obj, err := splitEvent([]byte(line))
		if err != nil {
			t.Errorf("splitEvent(%q): %v", line, err)
			continue
		}
		wantTyp, wantObj, ok := parseEnvelope([]byte(line))
		if !ok || typ != wantTyp || string(obj) != string(wantObj) {
			t.Errorf("splitEvent(%q) = %q, %s; the parser reads %q, %s", line, typ, obj, wantTyp, wantObj)
		}
	}
	for _, line := range []string{``, `{}`, `{"type":"ADDED"}`, `{"type":"ADDED","object":"x"}`, `{"type":"ADDED","object":{`, `[1]`, `{"Type":"ADDED","Object":{"kind":"Pod"}}`} {
		if typ, obj, err := splitEvent([]byte(line)); err == nil {
			t.Errorf("splitEvent(%q) = %q, %q; want an error", line, typ, obj)
		}
	}
}

// parseEnvelope reads an event's type and object with a JSON parser. Keys
// match exactly, as Kubernetes' JSON serializer matches them
// (sigs.k8s.io/json is case-sensitive; encoding/json's struct fields are not).
func parseEnvelope(line []byte) (string, []byte, bool) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return "", nil, false
	}
	var typ string
	if err := json.Unmarshal(env["type"], &typ); err != nil || typ == "" {
		return "", nil, false
	}
	obj := bytes.TrimSpace(env["object"])
	if len(obj) == 0 || obj[0] != '{' {
		return "", nil, false
	}
	return typ, obj, true
}

// FuzzSplitEvent: the split never panics, and for a valid line whose
// envelope holds two members, type and object, each once (every Kubernetes
// API server's encoding of a metav1.WatchEvent) it returns what a JSON
// parser reads. A repeated key, which no encoder writes, is read
// differently by different parsers (RFC 8259 section 4), so it is not held
// to one reading.
func FuzzSplitEvent(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a"}}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"a":"}"} }`))
	f.Add([]byte(`{"type":"","object":{}}`))
	f.Add([]byte(`{"tYpe":"0","oBjeCt":{"0":{"0000":"0"}}}`))
	f.Add([]byte("{\"type\":\"\xe5\",\"object\":{}}"))
	f.Add([]byte(`{"type":"\ud800","object":{}}`))
	f.Add([]byte(`{"type":"A\u0044DED","object":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		typ, obj, err := splitEvent(line)
		if !twoMembers(line) {
			return
		}
		wantTyp, wantObj, ok := parseEnvelope(line)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("splitEvent(%q): %v; the parser reads %q, %s", line, err, wantTyp, wantObj)
		}
		var a, b any
		if typ != wantTyp || json.Unmarshal(obj, &a) != nil || json.Unmarshal(wantObj, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("splitEvent(%q) = %q, %s; the parser reads %q, %s", line, typ, obj, wantTyp, wantObj)
		}
	})
}

// twoMembers reports whether line is a JSON object of exactly two members
// with distinct keys.
func twoMembers(line []byte) bool {
	d := json.NewDecoder(bytes.NewReader(line))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	keys := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		k, ok := tok.(string)
		if err != nil || !ok || keys[k] {
			return false
		}
		keys[k] = true
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		return false
	}
	_, err := d.Token()
	return err == io.EOF && len(keys) == 2
}

// pipeBody is a response body the test writes lines to.
type pipeBody struct {
	*io.PipeReader
	w *io.PipeWriter
}

func newPipeBody() *pipeBody {
	r, w := io.Pipe()
	return &pipeBody{PipeReader: r, w: w}
}

func (b *pipeBody) line(s string) { _, _ = io.WriteString(b.w, s+"\n") }

func TestStreamWatchDecodesEvents(t *testing.T) {
	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	defer w.Stop()
	go func() {
		body.line(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}}`)
		body.line(``)
		body.line(`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}`)
		body.line(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}}`)
		_ = body.w.Close()
	}()
	var got []string
	for ev := range w.ResultChan() {
		switch o := ev.Object.(type) {
		case *object.Raw:
			got = append(got, string(ev.Type)+" "+o.Namespace+"/"+o.Name+"@"+o.ResourceVersion+" "+o.GetAnnotations()[metav1.InitialEventsAnnotationKey])
		case *metav1.Status:
			got = append(got, string(ev.Type)+" "+string(o.Reason))
		default:
			t.Fatalf("event %s with %T", ev.Type, ev.Object)
		}
	}
	want := []string{"ADDED ns/a@5 ", "BOOKMARK /@7 true", "ERROR Expired"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestStreamWatchUndecodableEndsWith410: an event that cannot be decoded
// is a missed change; the watch ends with the 410 that makes the
// Reflector list again.
func TestStreamWatchUndecodableEndsWith410(t *testing.T) {
	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	defer w.Stop()
	var wg sync.WaitGroup
	var g gap
	var undecodable []error
	w.start(&wg, streamHooks{end: g.watchEnd(false), onUndecodable: func(err error) { undecodable = append(undecodable, err); g.record() }})
	go func() {
		body.line(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}`)
		body.line(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":7}}}`)
		body.line(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"c","resourceVersion":"7"}}}`)
	}()
	var got []watch.EventType
	var last watch.Event
	for ev := range w.ResultChan() {
		got = append(got, ev.Type)
		last = ev
	}
	wg.Wait()
	if len(got) != 2 || got[0] != watch.Added || got[1] != watch.Error {
		t.Fatalf("events %v, want ADDED then ERROR", got)
	}
	if s, ok := last.Object.(*metav1.Status); !ok || s.Code != http.StatusGone {
		t.Errorf("last event %#v, want a 410", last.Object)
	}
	if len(undecodable) != 1 {
		t.Errorf("undecodable called %d times, want 1", len(undecodable))
	}
}

// TestStreamWatchStopUnblocksRead: Stop ends a watch waiting for its next
// event, and its goroutines exit.
func TestStreamWatchStopUnblocksRead(t *testing.T) {
	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	var wg sync.WaitGroup
	var g gap
	w.start(&wg, streamHooks{end: g.watchEnd(false)})
	time.AfterFunc(50*time.Millisecond, w.Stop)
	for range w.ResultChan() {
		t.Error("an event from a silent watch")
	}
	wg.Wait()
}

// TestStreamWatchClosesIdleConnection: a watch on which nothing arrives
// for streamIdle ends, so the Reflector opens another.
func TestStreamWatchClosesIdleConnection(t *testing.T) {
	defer func(d time.Duration) { streamIdle = d }(streamIdle)
	streamIdle = 400 * time.Millisecond
	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	defer w.Stop()
	go func() {
		for range 3 { // lines keep it open past streamIdle
			body.line(`{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"7"}}}`)
			time.Sleep(150 * time.Millisecond)
		}
	}()
	start := time.Now()
	n := 0
	for range w.ResultChan() {
		n++
	}
	if n != 3 {
		t.Errorf("%d bookmarks before the idle end, want 3", n)
	}
	if took := time.Since(start); took < 700*time.Millisecond {
		t.Errorf("ended after %v, while lines still arrived", took)
	}
}

// recordResults records client-go's request results.
type recordResults struct {
	mu    sync.Mutex
	codes []string
}

func (r *recordResults) Increment(_ context.Context, code, method, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes = append(r.codes, method+" "+code)
}

// TestClientWatch: informerd's own watch request is counted in client-go's
// request metrics, decodes events, and returns the API server's status as
// the error of a refused watch.
func TestClientWatch(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("resourceVersion") == "1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1","reason":"Expired","code":410}`)
			return
		}
		if r.URL.Path != "/api/v1/namespaces/ns/pods" || r.URL.Query().Get("watch") != "true" || r.ProtoMajor != 1 {
			http.Error(w, "unexpected "+r.Proto+" "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}}`+"\n")
	}))
	defer srv.Close()
	rec := &recordResults{}
	defer func(old clientmetrics.ResultMetric) { clientmetrics.RequestResult = old }(clientmetrics.RequestResult)
	clientmetrics.RequestResult = rec

	c, err := NewClient(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	lw := c.ListWatch(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "ns", nil, nil)
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "4"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(*object.Raw); ok {
			got = append(got, string(ev.Type)+" "+o.Name)
		} else {
			got = append(got, fmt.Sprintf("%s %#v", ev.Type, ev.Object))
		}
	}
	if len(got) != 1 || got[0] != "ADDED a" {
		t.Errorf("events %q, want [ADDED a]", got)
	}
	_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from a compacted resourceVersion: %v, want the API server's 410 Expired", err)
	}
	if want := []string{"GET 200", "GET 410"}; !reflect.DeepEqual(rec.codes, want) {
		t.Errorf("client-go request results %q, want %q", rec.codes, want)
	}
}
