package reflector

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/informerd/informerd/internal/object"
)

// The tests of assumptions.go drive client-go's own cache.Reflector, built
// as Run builds it, over a fake list-watch whose watches the test writes
// to, inside a synctest bubble: every clock client-go reads is the
// bubble's, the backoff between its lists included (wait.DelayFunc.Until
// uses the real clock, which ReflectorOptions.Clock does not replace), so
// time passes only where a test sleeps and no assertion depends on how
// fast the machine is.

// reflectorModes are the two ways Run's Reflector starts: a list then a
// watch, or a streaming list.
var reflectorModes = []struct {
	name      string
	streaming bool
}{
	{name: "list then watch"},
	{name: "streaming list", streaming: true},
}

// recordingStore is client-go's view of a store: it records each call
// the Reflector makes, as "add ns/a@5", "replace ns/a@5,ns/b@7 at 10" or
// "bookmark 15", and refuses the first call of op refuse.
type recordingStore struct {
	mu     sync.Mutex
	refuse string
	calls  []string
}

var (
	_ cache.ReflectorStore         = (*recordingStore)(nil)
	_ cache.ReflectorBookmarkStore = (*recordingStore)(nil)
)

func (s *recordingStore) record(op, call string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, op+" "+call)
	if op == s.refuse {
		s.refuse = ""
		return errRefused
	}
	return nil
}

func keyAt(obj any) string {
	r := obj.(*object.Raw)
	return r.Namespace + "/" + r.Name + "@" + r.ResourceVersion
}

func (s *recordingStore) Add(obj any) error    { return s.record("add", keyAt(obj)) }
func (s *recordingStore) Update(obj any) error { return s.record("update", keyAt(obj)) }
func (s *recordingStore) Delete(obj any) error { return s.record("delete", keyAt(obj)) }
func (s *recordingStore) Resync() error        { return nil }
func (s *recordingStore) Bookmark(rv string) error {
	return s.record("bookmark", rv)
}

func (s *recordingStore) Replace(list []any, rv string) error {
	keys := make([]string, 0, len(list))
	for _, obj := range list {
		keys = append(keys, keyAt(obj))
	}
	slices.Sort(keys)
	return s.record("replace", strings.Join(keys, ",")+" at "+rv)
}

func (s *recordingStore) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// requestLog records the requests client-go's Reflector makes through a
// list-watch, as "list rv=0", "watch rv=10" or "stream rv=" (a watch that
// asks for initial events: a streaming list).
type requestLog struct {
	mu       sync.Mutex
	requests []string
	options  []metav1.ListOptions
}

func (l *requestLog) record(verb string, opts metav1.ListOptions) {
	if verb == "watch" && opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		verb = "stream"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, verb+" rv="+opts.ResourceVersion)
	l.options = append(l.options, opts)
}

// optionsOf returns the options of the i-th request.
func (l *requestLog) optionsOf(i int) metav1.ListOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.options[i]
}

func (l *requestLog) recorded() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.requests)
}

// wrap records every request made through lw.
func (l *requestLog) wrap(lw *cache.ListWatch) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l.record("list", opts)
			return lw.ListWithContextFunc(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			l.record("watch", opts)
			return lw.WatchFuncWithContext(ctx, opts)
		},
	}
}

// errorLog keeps the errors client-go logs through the context's logger.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) Init(logr.RuntimeInfo)                {}
func (l *errorLog) Enabled(int) bool                     { return true }
func (l *errorLog) WithValues(...any) logr.LogSink       { return l }
func (l *errorLog) WithName(string) logr.LogSink         { return l }
func (l *errorLog) Info(_ int, _ string, kv ...any)      { l.keep(nil, kv) }
func (l *errorLog) Error(err error, _ string, kv ...any) { l.keep(err, kv) }

func (l *errorLog) keep(err error, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs = append(l.errs, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if e, ok := kv[i+1].(error); ok && kv[i] == "err" {
			l.errs = append(l.errs, e)
		}
	}
}

// veryShort counts the VeryShortWatchErrors logged.
func (l *errorLog) veryShort() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, err := range l.errs {
		var vs *cache.VeryShortWatchError
		if errors.As(err, &vs) {
			n++
		}
	}
	return n
}

// clientGoRun is client-go's Reflector running over a fakeAPI, built as
// Run builds its own, with a store of the test's.
type clientGoRun struct {
	api      *fakeAPI
	requests *requestLog
	store    *recordingStore
	errs     *errorLog
	stop     func()
}

// runClientGo starts client-go's Reflector in mode (streaming or not) over
// a fakeAPI listing a@5 at resourceVersion 10, writing into store. Call
// it inside a synctest bubble; stop it before the bubble ends.
func runClientGo(t *testing.T, streaming bool, store *recordingStore) *clientGoRun {
	t.Helper()
	var client any = listThenWatch{}
	if streaming {
		clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
		client = nil // a client that does not refuse streaming lists
	}
	api := newFakeAPI(t, "10", raw(t, "a", "5", ""))
	api.signals = &Signals{}
	api.signals.LastResourceVersion.Store("")
	settleErrorBackoff()
	run := &clientGoRun{api: api, requests: &requestLog{}, store: store, errs: &errorLog{}}
	lw := cache.ToListWatcherWithWatchListSemantics(run.requests.wrap(api.listWatch()), client)
	cr := cache.NewReflectorWithOptions(lw, &object.Raw{}, store, cache.ReflectorOptions{Name: "configmaps"})
	ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logr.New(run.errs)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		cr.RunWithContext(ctx)
	}()
	run.stop = func() {
		cancel()
		<-done
	}
	return run
}

// synced returns the watch the Reflector reads once it has stored the
// first list, having checked that it listed then watched, or streamed,
// from the list's resourceVersion on.
func (r *clientGoRun) synced(t *testing.T, streaming bool) *watch.RaceFreeFakeWatcher {
	t.Helper()
	w := r.api.next(t)
	synctest.Wait()
	want := []string{"list rv=0", "watch rv=10"}
	if streaming {
		want = []string{"stream rv="}
	}
	if diff := cmp.Diff(want, r.requests.recorded()); diff != "" {
		t.Fatalf("requests to sync (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"replace ns/a@5 at 10"}, r.store.recorded()); diff != "" {
		t.Fatalf("stored to sync (-want +got):\n%s", diff)
	}
	return w
}

// requestsAfter returns the requests made after the first n.
func (r *clientGoRun) requestsAfter(n int) []string {
	return r.requests.recorded()[n:]
}

// settleErrorBackoff takes, at the start of a synctest bubble, the sleep
// apimachinery's HandleError makes so that errors are at least a
// millisecond apart. It measures from the previous error, at first from
// the real time at init: seen from a bubble, whose clock starts in 2000,
// that is a sleep of decades. Taken while nothing else runs in the
// bubble, it passes at once; the errors after it wait a millisecond at
// most.
func settleErrorBackoff() {
	ctx := klog.NewContext(context.Background(), logr.Discard())
	utilruntime.HandleErrorWithContext(ctx, errors.New("settling HandleError's backoff"), "")
}

func internalError() *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "etcd is down"}
}

// TestAssumptionWatchStopsOnlyOnErrorCloseOrCancel: client-go's Reflector
// does not stop a watch that is idle for hours, nor one whose change the
// store refused; it stops a watch that sends an ERROR, reads nothing after
// it, and stops the watch it reads when its context ends.
func TestAssumptionWatchStopsOnlyOnErrorCloseOrCancel(t *testing.T) {
	for _, mode := range reflectorModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := runClientGo(t, mode.streaming, &recordingStore{refuse: "add"})
				defer run.stop()
				w := run.synced(t, mode.streaming)
				synced := len(run.requests.recorded())

				w.Add(raw(t, "b", "11", "")) // the store refuses it
				synctest.Wait()
				time.Sleep(3 * time.Hour) // past any watch timeout, bookmark warning or resync
				synctest.Wait()
				if w.IsStopped() {
					t.Fatal("the Reflector stopped a watch that was idle, or whose change the store refused")
				}
				if got := run.requestsAfter(synced); len(got) != 0 {
					t.Fatalf("the Reflector made requests %q while its watch was open", got)
				}

				w.Modify(raw(t, "b", "12", ""))
				w.Error(internalError())
				w.Modify(raw(t, "b", "13", "")) // after the ERROR: never read
				synctest.Wait()
				if !w.IsStopped() {
					t.Error("the Reflector did not stop a watch that sent an ERROR")
				}
				want := []string{"replace ns/a@5 at 10", "add ns/b@11", "update ns/b@12"}
				if diff := cmp.Diff(want, run.store.recorded()); diff != "" {
					t.Errorf("stored (-want +got): the Reflector read past an ERROR\n%s", diff)
				}

				next := run.api.next(t) // it lists again, and watches
				synctest.Wait()
				run.stop()
				if !next.IsStopped() {
					t.Error("the Reflector did not stop its watch when its context ended")
				}
			})
		})
	}
}

// TestAssumptionStreamingListReplacesOnceOnTheSameWatch: a streaming list
// is a watch that asks for initial events; client-go's Reflector stores
// none of them one by one, calls Replace once with all of them at the
// resourceVersion of the bookmark that ends them, then stores the same
// watch's events, without any other request. When that watch ends, it
// watches again without asking for initial events, and calls no Replace.
func TestAssumptionStreamingListReplacesOnceOnTheSameWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := runClientGo(t, true, &recordingStore{})
		defer run.stop()
		w := run.api.next(t) // the fakeAPI sends a@5 and the end of initial events at 10
		w.Modify(raw(t, "a", "11", ""))
		w.Action(watch.Bookmark, bookmarkAt("12"))
		synctest.Wait()

		if diff := cmp.Diff([]string{"stream rv="}, run.requests.recorded()); diff != "" {
			t.Fatalf("requests (-want +got):\n%s", diff)
		}
		opts := run.requests.optionsOf(0)
		if !opts.AllowWatchBookmarks || opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			t.Errorf("streaming list options %+v, want bookmarks and NotOlderThan", opts)
		}
		want := []string{"replace ns/a@5 at 10", "update ns/a@11", "bookmark 12"}
		if diff := cmp.Diff(want, run.store.recorded()); diff != "" {
			t.Fatalf("stored (-want +got):\n%s", diff)
		}
		if w.IsStopped() {
			t.Fatal("the Reflector stopped the watch of its streaming list")
		}

		w.Stop() // the API server ends it
		run.api.next(t)
		synctest.Wait()
		if diff := cmp.Diff([]string{"stream rv=", "watch rv=12"}, run.requests.recorded()); diff != "" {
			t.Errorf("requests after the streaming list's watch ended (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, run.store.recorded()); diff != "" {
			t.Errorf("stored after the streaming list's watch ended (-want +got):\n%s", diff)
		}
	})
}

// TestAssumptionBookmarkMovesResumePoint: after a bookmark, client-go's
// Reflector tells the store and resumes from the bookmark's
// resourceVersion: the next watch starts there, and after a 410 the next
// list, or streaming list, asks for data no older than it. A change the
// store refused moves it as well (which is why gap.go ends the watch).
func TestAssumptionBookmarkMovesResumePoint(t *testing.T) {
	for _, mode := range reflectorModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := runClientGo(t, mode.streaming, &recordingStore{refuse: "update"})
				defer run.stop()
				w := run.synced(t, mode.streaming)
				synced := len(run.requests.recorded())

				w.Modify(raw(t, "a", "11", "")) // the store refuses it
				w.Stop()
				w = run.api.next(t)
				w.Action(watch.Bookmark, bookmarkAt("15"))
				w.Stop()
				w = run.api.next(t)
				w.Action(watch.Bookmark, bookmarkAt("20"))
				w.Error(missedStatus()) // a 410
				run.api.next(t)
				synctest.Wait()

				relist := "list rv=20"
				if mode.streaming {
					relist = "stream rv=20"
				}
				want := []string{"watch rv=11", "watch rv=15", relist}
				if got := run.requestsAfter(synced); !cmp.Equal(want, got[:min(len(got), len(want))]) {
					t.Errorf("requests %q, want to start with %q", got, want)
				}
				wantStored := []string{"replace ns/a@5 at 10", "update ns/a@11", "bookmark 15", "bookmark 20"}
				if got := run.store.recorded(); !cmp.Equal(wantStored, got[:min(len(got), len(wantStored))]) {
					t.Errorf("stored %q, want to start with %q", got, wantStored)
				}
			})
		})
	}
}

// TestAssumptionVeryShortWatchCountsEvents: a watch that closes at once
// after a single event (a bookmark, as a streamWatch that applied every
// change itself sends) is not a very short watch: client-go's Reflector
// watches again from the bookmark. Neither is an empty watch that lasted
// more than a second. An empty watch that closes at once is: the
// Reflector logs a VeryShortWatchError and lists again.
func TestAssumptionVeryShortWatchCountsEvents(t *testing.T) {
	for _, mode := range reflectorModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := runClientGo(t, mode.streaming, &recordingStore{})
				defer run.stop()
				w := run.synced(t, mode.streaming)
				synced := len(run.requests.recorded())

				w.Action(watch.Bookmark, bookmarkAt("11"))
				w.Stop() // no time has passed in the bubble
				w = run.api.next(t)
				synctest.Wait()
				if n := run.errs.veryShort(); n != 0 {
					t.Fatalf("%d very short watches after a watch with a bookmark", n)
				}

				time.Sleep(2 * time.Second)
				w.Stop()
				w = run.api.next(t)
				synctest.Wait()
				if n := run.errs.veryShort(); n != 0 {
					t.Fatalf("%d very short watches after an empty watch of two seconds", n)
				}

				w.Stop()
				run.api.next(t)
				synctest.Wait()
				if n := run.errs.veryShort(); n != 1 {
					t.Errorf("%d very short watches after an empty watch closed at once, want 1", n)
				}
				relist := "list rv=11"
				if mode.streaming {
					relist = "stream rv=11"
				}
				want := []string{"watch rv=11", "watch rv=11", relist}
				if got := run.requestsAfter(synced); !cmp.Equal(want, got[:min(len(got), len(want))]) {
					t.Errorf("requests %q, want to start with %q: only the empty watch closed at once is very short", got, want)
				}
			})
		})
	}
}

// TestAssumptionsAreChecked: every assumption names a test of this
// package that exists, and the tests named are all different.
func TestAssumptionsAreChecked(t *testing.T) {
	tests := map[string]bool{}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, a := range assumptions {
		if a.name == "" || a.behaviour == "" || a.why == "" || len(a.where) == 0 {
			t.Errorf("assumption %q is not fully described", a.name)
		}
		if !tests[a.test] {
			t.Errorf("assumption %q names test %s, which does not exist", a.name, a.test)
		}
		if seen[a.test] {
			t.Errorf("test %s checks two assumptions", a.test)
		}
		seen[a.test] = true
	}
}

// TestAssumptionsVerifiedVersion fails when go.mod's client-go is not of
// the minor version the assumptions were verified against: after an
// upgrade, read client-go's tools/cache/reflector.go (handleAnyWatch,
// watchList, watch) against each assumption, run their tests, then move
// assumptionsVerifiedAgainst and the version in docs/architecture.md.
func TestAssumptionsVerifiedVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go (v\d+\.\d+)\.`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/client-go")
	}
	if got := string(m[1]); got != assumptionsVerifiedAgainst {
		t.Errorf("go.mod requires client-go %s; its Reflector was verified against %s: re-verify every assumption in assumptions.go, then update assumptionsVerifiedAgainst and docs/architecture.md", got, assumptionsVerifiedAgainst)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "verified against client-go " + assumptionsVerifiedAgainst + ";"; !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
		t.Errorf("docs/architecture.md does not say %q", want)
	}
}
