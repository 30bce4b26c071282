package reflector

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/informerd/informerd/internal/object"
)

// TestRealReflectorRandomized is TestStreamWatchAppliesInOrder with
// client-go's own Reflector in place of the stand-in: informerd's
// Reflector.Run, its Client and streamWatch, against a fake API server
// over HTTP (apiModel). The server commits a random history of changes
// while it answers lists and watches, streaming lists or not, and fails
// them at random: a watch ends with EOF, an ERROR (500 or 410), an event
// that cannot be decoded or encoded, a truncated line, its timeout; a
// watch from a compacted resourceVersion is refused with 410; a list or a
// watch fails with 500; lists and streaming lists answer at any
// resourceVersion they may; writes and stores pause. Whatever reaches the
// queue must replay the server's history (replayQueue): every change once,
// in order, never backwards, no gap, no duplicate, each list exactly the
// server's state at its resourceVersion; once the history is done and the
// faults stop, the cache is the server's state.
//
// INFORMERD_REFLECTOR_SEEDS sets how many seeds run (64 by default);
// INFORMERD_REFLECTOR_SEED runs that one only.
func TestRealReflectorRandomized(t *testing.T) {
	seeds := []uint64{}
	n := uint64(64)
	if v, err := strconv.ParseUint(os.Getenv("INFORMERD_REFLECTOR_SEEDS"), 10, 64); err == nil {
		n = v
	}
	for seed := range n {
		seeds = append(seeds, seed)
	}
	if v, err := strconv.ParseUint(os.Getenv("INFORMERD_REFLECTOR_SEED"), 10, 64); err == nil {
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		streaming := seed%2 == 0
		t.Run(fmt.Sprintf("seed=%d/streaming=%v", seed, streaming), func(t *testing.T) {
			if streaming {
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
			}
			synctest.Test(t, func(t *testing.T) { realRandomized(t, seed, streaming) })
		})
	}
}

func realRandomized(t *testing.T, seed uint64, streaming bool) {
	settleErrorBackoff()
	rng := rand.New(rand.NewPCG(seed, 3))
	api := newAPIModel(t, rng)
	srv := startPipeServer(api)
	defer srv.Close()

	c, err := NewClient(&rest.Config{Host: srv.URL, Dial: srv.Listener.(*pipeListener).dial})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := object.NewEncoder(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	queue := &pausingQueue{rng: rand.New(rand.NewPCG(seed, 4))}
	var client any = listThenWatch{}
	if streaming {
		client = c
	}
	lw := c.ListWatch(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ns", nil, enc.Prepare)
	r := New(lw, enc, queue, Options{Name: "configmaps", Client: client, Log: slog.New(slog.DiscardHandler)})

	ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logr.Discard()))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { r.Run(ctx) })
	wg.Go(func() { api.commitAll(ctx) })

	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (INFORMERD_REFLECTOR_SEED=%d), streaming=%v: %s\nrequests and faults: %v\nqueued:\n  %s", seed, seed, streaming,
			fmt.Sprintf(format, args...), api.counted(), strings.Join(queue.lines(), "\n  "))
	}
	for deadline := time.Now().Add(2 * time.Hour); ; {
		time.Sleep(time.Second)
		calls := queue.recorded()
		history, done := api.history()
		cache, at, err := replayQueue(calls, history)
		if err != nil {
			fail("%v", err)
		}
		if done && at >= history[len(history)-1].rv && equalState(cache, stateAt(history, at)) {
			break
		}
		if time.Now().After(deadline) {
			fail("two hours after the history began, the cache is at resourceVersion %d, the server at %d (history done: %v)", at, history[len(history)-1].rv, done)
		}
	}
	cancel()
	wg.Wait()
	history, _ := api.history()
	cache, _, err := replayQueue(queue.recorded(), history)
	if err != nil {
		fail("%v", err)
	}
	if want := stateAt(history, history[len(history)-1].rv); !equalState(cache, want) {
		fail("the cache holds %v, the server %v", cache, want)
	}
	t.Logf("%d changes, %d calls of the queue; requests and faults: %v", len(history), len(queue.recorded()), api.counted())
}

// apiChange is one change of the fake API server's history.
type apiChange struct {
	typ  watch.EventType // ADDED, MODIFIED or DELETED
	name string
	rv   uint64
}

// key is the change's object's key, as the queue records it.
func (c apiChange) key() string { return "ns/" + c.name }

// json is the object of the change's event.
func (c apiChange) json(extra string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":"%d"%s},"data":{"v":"%d"}}`,
		c.name, c.name, c.rv, extra, c.rv)
}

// stateAt is the server's objects at rv: each object's last change, if
// not a deletion, by key.
func stateAt(history []apiChange, rv uint64) map[string]apiChange {
	state := map[string]apiChange{}
	for _, c := range history {
		if c.rv > rv {
			break
		}
		if c.typ == watch.Deleted {
			delete(state, c.key())
		} else {
			state[c.key()] = c
		}
	}
	return state
}

// sortedState is state's objects by resourceVersion.
func sortedState(state map[string]apiChange) []apiChange {
	return slices.SortedFunc(maps.Values(state), func(a, b apiChange) int { return cmp.Compare(a.rv, b.rv) })
}

func equalState(a, b map[string]apiChange) bool {
	if len(a) != len(b) {
		return false
	}
	for k, c := range a {
		if d, ok := b[k]; !ok || d.rv != c.rv {
			return false
		}
	}
	return true
}

// replayQueue replays what reached the queue against the server's
// history, and returns the cache it makes and its resourceVersion. Each
// change must be the next change of the history after the cache's
// resourceVersion; each list the server's state at its resourceVersion,
// not older than the cache; each bookmark not older than the cache and
// not past a change it lacks.
func replayQueue(calls []queueCall, history []apiChange) (map[string]apiChange, uint64, error) {
	cache := map[string]apiChange{}
	var at uint64
	next := func() (apiChange, bool) {
		for _, c := range history {
			if c.rv > at {
				return c, true
			}
		}
		return apiChange{}, false
	}
	for i, call := range calls {
		switch call.Op {
		case "replace":
			rv, _ := strconv.ParseUint(call.RV, 10, 64)
			if rv < at {
				return nil, 0, fmt.Errorf("call %d: a list at resourceVersion %d after the cache reached %d: backwards", i, rv, at)
			}
			state := stateAt(history, rv)
			var want []string
			for _, c := range state {
				want = append(want, fmt.Sprintf("%s@%d", c.key(), c.rv))
			}
			got := slices.Sorted(slices.Values(call.Keys))
			if slices.Sort(want); !slices.Equal(got, want) {
				return nil, 0, fmt.Errorf("call %d: the list at resourceVersion %d holds %q, the server had %q", i, rv, got, want)
			}
			cache, at = state, rv
		case "add", "update", "delete":
			c, ok := next()
			want := fmt.Sprintf("%s %s@%d", map[watch.EventType]string{watch.Added: "add", watch.Modified: "update", watch.Deleted: "delete"}[c.typ], c.key(), c.rv)
			if got := call.Op + " " + call.Keys[0]; !ok || got != want {
				return nil, 0, fmt.Errorf("call %d: %s after resourceVersion %d, where the next change is %q: a duplicate, a gap or out of order", i, got, at, want)
			}
			if c.typ == watch.Deleted {
				delete(cache, c.key())
			} else {
				cache[c.key()] = c
			}
			at = c.rv
		case "bookmark":
			rv, _ := strconv.ParseUint(call.RV, 10, 64)
			if rv < at {
				return nil, 0, fmt.Errorf("call %d: a bookmark at %d after the cache reached %d: backwards", i, rv, at)
			}
			if c, ok := next(); ok && c.rv <= rv {
				return nil, 0, fmt.Errorf("call %d: a bookmark at %d while the cache, at %d, lacks the change at %d: a gap", i, rv, at, c.rv)
			}
			at = rv
		}
	}
	return cache, at, nil
}

// pausingQueue is a recordingQueue that sometimes pauses before taking a
// change, as a full queue would.
type pausingQueue struct {
	recordingQueue
	rngMu sync.Mutex
	rng   *rand.Rand
}

func (q *pausingQueue) pause() {
	q.rngMu.Lock()
	d := time.Duration(q.rng.IntN(40)-30) * time.Millisecond
	q.rngMu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

func (q *pausingQueue) Add(o *object.Object) error    { q.pause(); return q.recordingQueue.Add(o) }
func (q *pausingQueue) Update(o *object.Object) error { q.pause(); return q.recordingQueue.Update(o) }
func (q *pausingQueue) Delete(o *object.Object) error { q.pause(); return q.recordingQueue.Delete(o) }
func (q *pausingQueue) Bookmark(rv string) error      { q.pause(); return q.recordingQueue.Bookmark(rv) }
func (q *pausingQueue) Replace(objs []*object.Object, rv string) error {
	q.pause()
	return q.recordingQueue.Replace(objs, rv)
}

// lines is what reached the queue, a line per call.
func (q *pausingQueue) lines() []string {
	var out []string
	for _, c := range q.recorded() {
		out = append(out, fmt.Sprintf("%s %s %s", c.Op, c.RV, strings.Join(c.Keys, ",")))
	}
	return out
}

// apiModel is a fake API server of one namespace's ConfigMaps: a history
// of changes it commits over time, and lists and watches answered from
// it, failing at random while faults is on. Its methods may be called
// concurrently.
type apiModel struct {
	t *testing.T

	mu      sync.Mutex
	rng     *rand.Rand
	toGo    int         // changes still to commit
	changes []apiChange // committed, in resourceVersion order
	// rv is etcd's resourceVersion: the last change's, or past it when
	// other resources changed since.
	rv uint64
	// window is how many changes a watch can start before: one from an
	// older resourceVersion is refused with 410.
	window  int
	faults  bool
	changed chan struct{} // closed by the next commit
	// counts counts requests by kind and faults by kind.
	counts map[string]int
}

func newAPIModel(t *testing.T, rng *rand.Rand) *apiModel {
	m := &apiModel{t: t, rng: rng, rv: 100, window: 2 + rng.IntN(12), faults: true, changed: make(chan struct{}), counts: map[string]int{}}
	m.toGo = 20 + rng.IntN(40)
	for range 1 + rng.IntN(5) {
		m.commitLocked()
	}
	return m
}

// commitLocked commits a random change.
func (m *apiModel) commitLocked() {
	state := stateAt(m.changes, m.rv)
	c := apiChange{typ: watch.Added, name: fmt.Sprintf("cm%d", m.rng.IntN(6))}
	if _, ok := state[c.key()]; ok {
		c.typ = watch.Modified
		if m.rng.IntN(3) == 0 {
			c.typ = watch.Deleted
		}
	}
	m.rv += 1 + uint64(m.rng.IntN(2))*uint64(m.rng.IntN(3)) // other resources' writes
	c.rv = m.rv
	m.changes = append(m.changes, c)
	close(m.changed)
	m.changed = make(chan struct{})
}

// commitAll commits the rest of the history, pausing between changes,
// then stops the faults.
func (m *apiModel) commitAll(ctx context.Context) {
	for ctx.Err() == nil {
		m.mu.Lock()
		if m.toGo == 0 {
			m.faults = false
			m.mu.Unlock()
			return
		}
		m.toGo--
		m.commitLocked()
		pause := time.Duration(m.rng.IntN(3)) * time.Duration(m.rng.IntN(1500)) * time.Millisecond
		m.mu.Unlock()
		time.Sleep(pause)
	}
}

// history returns the changes committed so far, and whether they are all.
func (m *apiModel) history() ([]apiChange, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.changes), m.toGo == 0
}

func (m *apiModel) counted() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.counts)
}

// faultLocked reports, one time in oneIn while faults are on, that the
// request fails with one of kinds, which it returns and counts.
func (m *apiModel) faultLocked(oneIn int, kinds ...string) string {
	if !m.faults || m.rng.IntN(oneIn) != 0 {
		return ""
	}
	k := kinds[m.rng.IntN(len(kinds))]
	m.counts[k]++
	return k
}

// compactedLocked is the oldest resourceVersion a watch can start from.
func (m *apiModel) compactedLocked() uint64 {
	if len(m.changes) <= m.window {
		return 0
	}
	return m.changes[len(m.changes)-m.window-1].rv
}

// pickLocked is a resourceVersion a list, or a streaming list, asked for
// data not older than from may answer at: the latest for "", any for "0".
func (m *apiModel) pickLocked(from string) uint64 {
	if from == "" {
		return m.rv
	}
	low := m.changes[0].rv
	if from != "0" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil || n > m.rv {
			m.t.Errorf("a request for resourceVersion %q, which the server has not reached (%d)", from, m.rv)
			return m.rv
		}
		low = max(low, n)
	}
	return low + m.rng.Uint64N(m.rv-low+1)
}

// nextLocked is the index of the first change after rv.
func (m *apiModel) nextLocked(rv uint64) int {
	if i := slices.IndexFunc(m.changes, func(c apiChange) bool { return c.rv > rv }); i >= 0 {
		return i
	}
	return len(m.changes)
}

func (m *apiModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/namespaces/ns/configmaps" {
		m.t.Errorf("a request for %s", r.URL)
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	m.mu.Lock()
	switch {
	case q.Get("sendInitialEvents") == "true":
		m.counts["(streaming lists)"]++
	case q.Get("watch") == "true":
		m.counts["(watches)"]++
	default:
		m.counts["(lists)"]++
	}
	m.mu.Unlock()
	if q.Get("watch") == "true" {
		m.serveWatch(w, r, q.Get("resourceVersion"), q.Get("sendInitialEvents") == "true", q.Get("allowWatchBookmarks") == "true", q.Get("timeoutSeconds"))
		return
	}
	m.mu.Lock()
	if m.faultLocked(8, "list 500") != "" {
		m.mu.Unlock()
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError)
		return
	}
	at := m.pickLocked(q.Get("resourceVersion"))
	state := stateAt(m.changes, at)
	m.mu.Unlock()
	items := make([]string, 0, len(state))
	for _, c := range sortedState(state) {
		items = append(items, c.json(""))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":[%s]}`, at, strings.Join(items, ","))
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintln(w, statusJSON(code, reason))
}

func statusJSON(code int, reason metav1.StatusReason) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the fake API server's %d","reason":%q,"code":%d}`, code, reason, code)
}

// watchStream writes one watch's events, a line each.
type watchStream struct {
	w   http.ResponseWriter
	rng *rand.Rand
}

func (s *watchStream) line(typ watch.EventType, obj string) bool {
	if s.rng.IntN(6) == 0 {
		time.Sleep(time.Duration(1+s.rng.IntN(300)) * time.Millisecond)
	}
	_, err := fmt.Fprintf(s.w, `{"type":%q,"object":%s}`+"\n", typ, obj)
	s.w.(http.Flusher).Flush()
	return err == nil
}

func bookmarkJSON(rv uint64, initialEventsEnd bool) string {
	annotations := ""
	if initialEventsEnd {
		annotations = fmt.Sprintf(`,"annotations":{%q:"true"}`, metav1.InitialEventsAnnotationKey)
	}
	return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"%d"%s}}`, rv, annotations)
}

// change writes the event of c, or, as fault asks, one that cannot be
// decoded or encoded, or half of it.
func (s *watchStream) change(c apiChange, fault string) bool {
	switch fault {
	case "undecodable":
		return s.line(c.typ, `{"kind":"ConfigMap","metadata":{"name":7}}`)
	case "unencodable":
		return s.line(c.typ, c.json(`,"labels":{"app":1}`))
	case "truncated":
		line := fmt.Sprintf(`{"type":%q,"object":%s}`, c.typ, c.json(""))
		_, _ = fmt.Fprint(s.w, line[:len(line)/2])
		return false
	}
	return s.line(c.typ, c.json(""))
}

// Faults of a change's event: the watch goes on after the first two, not
// after the last.
var changeFaults = []string{"undecodable", "unencodable", "truncated"}

func (m *apiModel) serveWatch(w http.ResponseWriter, r *http.Request, from string, streaming, bookmarks bool, timeout string) {
	m.mu.Lock()
	if f := m.faultLocked(10, "watch 500", "watch 429"); f != "" {
		m.mu.Unlock()
		if f == "watch 429" {
			writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
		} else {
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError)
		}
		return
	}
	s := &watchStream{w: w, rng: rand.New(rand.NewPCG(m.rng.Uint64(), 5))}
	var initial []apiChange
	var at uint64
	if streaming {
		at = m.pickLocked(from)
		initial = sortedState(stateAt(m.changes, at))
	} else {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil || n > m.rv {
			m.t.Errorf("a watch from resourceVersion %q; the server is at %d", from, m.rv)
		}
		if n < m.compactedLocked() {
			m.counts["410 compacted"]++
			inStream := m.rng.IntN(2) == 0
			m.mu.Unlock()
			if !inStream {
				writeStatus(w, http.StatusGone, metav1.StatusReasonExpired)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			s.line(watch.Error, statusJSON(http.StatusGone, metav1.StatusReasonExpired))
			return
		}
		at = n
	}
	next := m.nextLocked(at)
	m.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for _, c := range initial {
		m.mu.Lock()
		f := m.faultLocked(15, append(changeFaults, "eof")...)
		m.mu.Unlock()
		if f == "eof" || !s.change(c, f) {
			return
		}
	}
	if streaming && !s.line(watch.Bookmark, bookmarkJSON(at, true)) {
		return
	}

	seconds, _ := strconv.Atoi(timeout)
	expire := time.NewTimer(time.Duration(seconds) * time.Second)
	defer expire.Stop()
	for {
		m.mu.Lock()
		var c *apiChange
		faults := []string{"eof", "ERROR 500", "ERROR 410"}
		if next < len(m.changes) {
			cc := m.changes[next]
			c = &cc
			next++
			faults = append(faults, changeFaults...)
		}
		f := m.faultLocked(10, faults...)
		rv, changed := m.rv, m.changed
		m.mu.Unlock()
		switch {
		case f == "eof":
			return
		case strings.HasPrefix(f, "ERROR"):
			code, reason := http.StatusInternalServerError, metav1.StatusReasonInternalError
			if f == "ERROR 410" {
				code, reason = http.StatusGone, metav1.StatusReasonExpired
			}
			// and, at times, what follows: never to be applied
			s.line(watch.Error, statusJSON(code, reason))
			if c != nil && s.rng.IntN(2) == 0 {
				s.change(*c, "")
			}
			return
		case c != nil:
			if !s.change(*c, f) {
				return
			}
			continue
		}
		// Every change up to rv is sent: a bookmark at rv skips none.
		if bookmarks && s.rng.IntN(3) == 0 && !s.line(watch.Bookmark, bookmarkJSON(rv, false)) {
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Duration(1+s.rng.IntN(60)) * time.Second):
			if bookmarks && !s.line(watch.Bookmark, bookmarkJSON(rv, false)) {
				return
			}
		case <-expire.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// startPipeServer serves h over in-memory connections (net.Pipe), which
// a synctest bubble sees blocked as it sees channels: its clock moves
// while a watch waits for its next event.
func startPipeServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv.Start()
	return srv
}

// pipeListener accepts the connections its dial makes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// dial is a rest.Config's Dial.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
