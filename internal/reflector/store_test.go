package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/object"
)

// raw is a ConfigMap in namespace ns as the API server sends it, with
// extra JSON fields added to its metadata.
func raw(t *testing.T, name, rv, extra string) *object.Raw {
	t.Helper()
	r, err := object.ParseRaw(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":%q%s}}`, name, name, rv, extra))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fakeAPI lists its objects and hands each watch to the test. A watch
// asked for initial events (a streaming list) starts with them and the
// bookmark that ends them.
type fakeAPI struct {
	t       *testing.T
	watches chan *watch.RaceFreeFakeWatcher
	// relisted receives the reflector's recorded resourceVersion at each
	// list and streaming list after the first.
	relisted chan string
	signals  *Signals

	mu      sync.Mutex
	objects []*object.Raw
	rv      string
	lists   int
}

func newFakeAPI(t *testing.T, rv string, objects ...*object.Raw) *fakeAPI {
	return &fakeAPI{t: t, watches: make(chan *watch.RaceFreeFakeWatcher, 4), relisted: make(chan string, 1), objects: objects, rv: rv}
}

// set changes what the next lists return.
func (a *fakeAPI) set(rv string, objects ...*object.Raw) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.objects, a.rv = objects, rv
}

// listed counts a list; from the second on, it reports the reflector's
// resourceVersion as it lists.
func (a *fakeAPI) listed() (objects []*object.Raw, rv string) {
	a.mu.Lock()
	a.lists++
	again := a.lists > 1
	objects, rv = slices.Clone(a.objects), a.rv
	a.mu.Unlock()
	if again {
		select {
		case a.relisted <- a.signals.LastResourceVersion.Load().(string):
		default: // only the first relist is reported
		}
	}
	return objects, rv
}

func (a *fakeAPI) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			objects, rv := a.listed()
			l := &object.RawList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
			for _, o := range objects {
				l.Items = append(l.Items, *o)
			}
			return l, nil
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				objects, rv := a.listed()
				for _, o := range objects {
					w.Add(o)
				}
				w.Action(watch.Bookmark, raw(a.t, "", rv, `,"annotations":{"k8s.io/initial-events-end":"true"}`))
			}
			a.watches <- w
			return w, nil
		},
	}
}

// listThenWatch makes client-go's Reflector list and then watch instead
// of asking for a streaming list.
type listThenWatch struct{}

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// queueCall is one call of a recordingQueue.
type queueCall struct {
	Op   string
	Keys []string // with resourceVersions: "ns/a@2"
	RV   string
}

// recordingQueue records the calls it accepts and refuses the first call
// of op refuse.
type recordingQueue struct {
	refuse string

	mu    sync.Mutex
	calls []queueCall
}

var errRefused = errors.New("the queue refused")

func (q *recordingQueue) record(op, rv string, objs ...*object.Object) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if op == q.refuse {
		q.refuse = ""
		return errRefused
	}
	c := queueCall{Op: op, RV: rv}
	for _, o := range objs {
		c.Keys = append(c.Keys, o.Key+"@"+o.ResourceVersion)
	}
	q.calls = append(q.calls, c)
	return nil
}

func (q *recordingQueue) Add(o *object.Object) error    { return q.record("add", "", o) }
func (q *recordingQueue) Update(o *object.Object) error { return q.record("update", "", o) }
func (q *recordingQueue) Delete(o *object.Object) error { return q.record("delete", "", o) }
func (q *recordingQueue) Bookmark(rv string) error      { return q.record("bookmark", rv) }
func (q *recordingQueue) Replace(objs []*object.Object, rv string) error {
	return q.record("replace", rv, objs...)
}

func (q *recordingQueue) recorded() []queueCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

// logRecords keeps the records logged through it, their attributes as
// strings.
type logRecords struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// at returns the records at level, with only the attributes in keep.
func (l *logRecords) at(level slog.Level, keep ...string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.records {
		if r.Level != level {
			continue
		}
		m := map[string]string{}
		for _, k := range keep {
			if v, ok := r.Attrs[k]; ok {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	return out
}

// next returns the next watch the reflector starts, failing after a
// minute of the bubble's time.
func (a *fakeAPI) next(t *testing.T) *watch.RaceFreeFakeWatcher {
	t.Helper()
	select {
	case w := <-a.watches:
		return w
	case <-time.After(time.Minute):
		t.Fatal("no watch started within a minute")
		return nil
	}
}

// TestMissedChangeIsRecovered runs client-go's Reflector through the
// adapter, in both of its modes, against a fake API server. A change of the
// watch that cannot be encoded, or that the queue refuses, must not be
// recorded as received: the watch ends, the Reflector lists again, and the
// list brings the change. The failure is counted and logged with the
// object's name and resourceVersion.
func TestMissedChangeIsRecovered(t *testing.T) {
	tests := []struct {
		name   string
		refuse string // the queue's op that fails once
		// change is the watch event; after it the API server holds what
		// set left.
		change    func(t *testing.T, w *watch.RaceFreeFakeWatcher)
		state     func(t *testing.T) []*object.Raw
		reason    string
		wantFinal []string
	}{
		{
			name:      "update refused by the queue",
			refuse:    "update",
			change:    func(t *testing.T, w *watch.RaceFreeFakeWatcher) { w.Modify(raw(t, "a", "2", "")) },
			state:     func(t *testing.T) []*object.Raw { return []*object.Raw{raw(t, "a", "2", "")} },
			reason:    ReasonQueue,
			wantFinal: []string{"ns/a@2"},
		},
		{
			name:   "update that cannot be encoded",
			change: func(t *testing.T, w *watch.RaceFreeFakeWatcher) { w.Modify(raw(t, "a", "2", `,"labels":{"app":1}`)) },
			// The API server's list has the object as it should be.
			state:     func(t *testing.T) []*object.Raw { return []*object.Raw{raw(t, "a", "2", "")} },
			reason:    ReasonEncode,
			wantFinal: []string{"ns/a@2"},
		},
		{
			name:      "delete refused by the queue",
			refuse:    "delete",
			change:    func(t *testing.T, w *watch.RaceFreeFakeWatcher) { w.Delete(raw(t, "a", "2", "")) },
			state:     func(*testing.T) []*object.Raw { return nil },
			reason:    ReasonQueue,
			wantFinal: nil,
		},
	}
	modes := []struct {
		name   string
		client any
	}{
		{name: "list then watch", client: listThenWatch{}},
		{name: "streaming list"},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					api := newFakeAPI(t, "1", raw(t, "a", "1", ""))
					enc, err := object.NewEncoder(nil, true)
					if err != nil {
						t.Fatal(err)
					}
					queue := &recordingQueue{refuse: tt.refuse}
					logs := &logRecords{}
					r := New(api.listWatch(), enc, queue, Options{Name: "configmaps", Client: mode.client, Log: slog.New(logs)})
					api.signals = r.Signals()
					ctx, cancel := context.WithCancel(t.Context())
					var wg sync.WaitGroup
					wg.Go(func() { r.Run(ctx) })
					defer wg.Wait()
					defer cancel()

					w := api.next(t)
					api.set("2", tt.state(t)...)
					tt.change(t, w)
					synctest.Wait() // the change is handled; the relist waits for client-go's backoff
					if got := r.Signals().LastResourceVersion.Load(); got != "1" {
						t.Errorf("LastResourceVersion = %q after a change that was not queued, want %q", got, "1")
					}
					if !w.IsStopped() {
						t.Error("the watch that delivered the missed change was not stopped")
					}
					select {
					case rv := <-api.relisted:
						if rv != "1" {
							t.Errorf("the reflector relisted having recorded resourceVersion %q, want %q: it recorded a change it had not queued", rv, "1")
						}
					case <-time.After(time.Minute):
						t.Fatal("the reflector did not list again within a minute")
					}
					api.next(t)     // the watch after the relist
					synctest.Wait() // its initial events, if any, are queued

					want := []queueCall{{Op: "replace", Keys: []string{"ns/a@1"}, RV: "1"}, {Op: "replace", Keys: tt.wantFinal, RV: "2"}}
					if diff := cmp.Diff(want, queue.recorded()); diff != "" {
						t.Errorf("queued (-want +got):\n%s", diff)
					}
					sig := r.Signals()
					got := map[string]int64{ReasonEncode: sig.EncodeErrors.Load(), ReasonQueue: sig.QueueErrors.Load()}
					wantErrors := map[string]int64{ReasonEncode: 0, ReasonQueue: 0}
					wantErrors[tt.reason] = 1
					if diff := cmp.Diff(wantErrors, got); diff != "" {
						t.Errorf("missed changes by reason (-want +got):\n%s", diff)
					}
					if got := sig.LastResourceVersion.Load(); got != "2" {
						t.Errorf("LastResourceVersion = %q after the relist, want 2", got)
					}
					if got, want := sig.Expired.Load(), int64(0); got != want {
						t.Errorf("Expired = %d, want %d: the watch's end is not the API server's 410", got, want)
					}
					wantLog := []map[string]string{{"object": "ns/a", "resourceVersion": "2", "reason": tt.reason}}
					if diff := cmp.Diff(wantLog, logs.at(slog.LevelError, "object", "resourceVersion", "reason")); diff != "" {
						t.Errorf("error logs (-want +got):\n%s", diff)
					}
				})
			})
		}
	}
}

// TestReplaceNotQueued: a list that cannot be encoded or queued fails its
// Replace, which makes client-go list again, and records nothing as
// received; the failure is counted and shown until a list is queued.
func TestReplaceNotQueued(t *testing.T) {
	tests := []struct {
		name   string
		refuse string
		list   func(t *testing.T) []any
		reason string
	}{
		{name: "refused by the queue", refuse: "replace", list: func(t *testing.T) []any { return []any{raw(t, "a", "2", "")} }, reason: ReasonQueue},
		{name: "an object that cannot be encoded", list: func(t *testing.T) []any {
			return []any{raw(t, "a", "2", ""), raw(t, "b", "2", `,"labels":{"app":1}`)}
		}, reason: ReasonEncode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := object.NewEncoder(nil, true)
			if err != nil {
				t.Fatal(err)
			}
			queue := &recordingQueue{refuse: tt.refuse}
			logs := &logRecords{}
			r := New(nil, enc, queue, Options{Name: "configmaps", Log: slog.New(logs)})
			s := (*store)(r)
			if err := s.Replace(tt.list(t), "2"); err == nil {
				t.Fatal("Replace succeeded")
			}
			sig := r.Signals()
			if got := sig.LastResourceVersion.Load(); got != "" {
				t.Errorf("LastResourceVersion = %q after a list that was not queued, want none", got)
			}
			if sig.LastError.Load() == "" {
				t.Error("LastError is empty after a list that was not queued")
			}
			got := map[string]int64{ReasonEncode: sig.EncodeErrors.Load(), ReasonQueue: sig.QueueErrors.Load()}
			want := map[string]int64{ReasonEncode: 0, ReasonQueue: 0}
			want[tt.reason] = 1
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("not queued by reason (-want +got):\n%s", diff)
			}
			if got := logs.at(slog.LevelError, "reason"); !cmp.Equal(got, []map[string]string{{"reason": tt.reason}}) {
				t.Errorf("error logs %v, want one with reason %s", got, tt.reason)
			}

			if err := s.Replace([]any{raw(t, "a", "3", "")}, "3"); err != nil {
				t.Fatal(err)
			}
			if got := sig.LastResourceVersion.Load(); got != "3" {
				t.Errorf("LastResourceVersion = %q after a list was queued, want 3", got)
			}
			if got := sig.LastError.Load(); got != "" {
				t.Errorf("LastError = %q after a list was queued, want none", got)
			}
		})
	}
}
