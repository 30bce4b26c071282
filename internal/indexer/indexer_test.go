package indexer

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var names = []string{"namespace", "node", "image"}

// pod builds an object with a node and any number of images.
func pod(key string, rv int, node string, images ...string) *object.Object {
	ns, name := object.SplitKey(key)
	o := &object.Object{Key: key, Namespace: ns, Name: name, UID: "uid-" + key, ResourceVersion: strconv.Itoa(rv), RV: uint64(rv)}
	var nodes []string
	if node != "" {
		nodes = []string{node}
	}
	o.Values = [][]string{{ns}, nodes, images}
	return o
}

func d(t watch.EventType, o *object.Object) deltafifo.Delta {
	return deltafifo.Delta{Type: t, Object: o, ResourceVersion: o.ResourceVersion}
}

func synced(t *testing.T, ix *Indexer, rv string, objs ...*object.Object) {
	t.Helper()
	var ds []deltafifo.Delta
	for _, o := range objs {
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: rv, Synced: true})
	ix.Apply(ds)
}

func keys(s Snapshot) []string {
	var out []string
	for _, o := range s.Objects {
		out = append(out, o.Key)
	}
	return out
}

// recorder is a Listener that keeps events; the indexer calls it under its
// lock while tests read from another goroutine.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) OnEvent(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(ev.Type) + " " + ev.ResourceVersion
	if ev.Object != nil {
		s += " " + ev.Object.Key
	}
	r.evs = append(r.evs, s)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.evs...)
}

func TestIndexTransitions(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 100})
	synced(t, ix, "10", pod("a/p1", 1, "n1", "img:1", "sidecar:1"), pod("a/p2", 2, "n2", "img:1"))

	lookup := func(index string, values ...string) []string {
		s, err := ix.ByIndex(index, values, nil)
		if err != nil {
			t.Fatal(err)
		}
		return keys(s)
	}
	tests := []struct {
		name   string
		delta  deltafifo.Delta
		index  string
		values []string
		want   []string
	}{
		{"multi-valued index finds by either value", d(watch.Bookmark, &object.Object{ResourceVersion: "10"}), "image", []string{"sidecar:1"}, []string{"a/p1"}},
		{"several values are a union without duplicates", d(watch.Bookmark, &object.Object{ResourceVersion: "10"}), "image", []string{"img:1", "sidecar:1"}, []string{"a/p1", "a/p2"}},
		{"moving node leaves the old value", d(watch.Modified, pod("a/p1", 11, "n2", "img:2")), "node", []string{"n1"}, nil},
		{"and enters the new one", d(watch.Bookmark, &object.Object{ResourceVersion: "11"}), "node", []string{"n2"}, []string{"a/p1", "a/p2"}},
		{"old image value is gone", d(watch.Bookmark, &object.Object{ResourceVersion: "11"}), "image", []string{"sidecar:1"}, nil},
		{"delete removes from every index", d(watch.Deleted, pod("a/p2", 12, "n2", "img:1")), "image", []string{"img:1"}, nil},
		{"namespace index", d(watch.Added, pod("b/p3", 13, "")), "namespace", []string{"b"}, []string{"b/p3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.delta.Type == watch.Bookmark {
				tt.delta.Object = nil
			}
			ix.Apply([]deltafifo.Delta{tt.delta})
			if diff := cmp.Diff(tt.want, lookup(tt.index, tt.values...)); diff != "" {
				t.Errorf("ByIndex(%s, %v) (-want +got):\n%s", tt.index, tt.values, diff)
			}
		})
	}
	if _, err := ix.ByIndex("nope", nil, nil); !errors.Is(err, ErrUnknownIndex) {
		t.Errorf("ByIndex(unknown) = %v, want ErrUnknownIndex", err)
	}
	if st := ix.Stats(); st.Objects != 2 || st.ResourceVersion != "13" {
		t.Errorf("Stats() = %+v, want 2 objects at RV 13", st)
	}
}

func TestEventsCarryBeforeAndAfter(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 100})
	synced(t, ix, "10", pod("a/p1", 1, "n1"))
	ix.Apply([]deltafifo.Delta{d(watch.Modified, pod("a/p1", 11, "n2"))})
	evs, err := since(ix, "10")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != watch.Modified {
		t.Fatalf("Since(10) = %v, want one MODIFIED", evs)
	}
	if got := []string{evs[0].Prev.Values[1][0], evs[0].Object.Values[1][0]}; !cmp.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("node before/after = %v, want [n1 n2]", got)
	}
}

func TestInitialListIsNotHistory(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 100})
	if err := ix.Join(Start{}, func(Joined) { t.Error("Join before sync called fn") }); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Join before sync = %v, want ErrNotSynced", err)
	}
	synced(t, ix, "10", pod("a/p1", 1, "n1"))
	evs, err := since(ix, "10")
	if err != nil || len(evs) != 0 {
		t.Errorf("Since(10) after first sync = %v, %v; want no events", evs, err)
	}
	if _, err := since(ix, "9"); !errors.Is(err, ErrTooOld) {
		t.Errorf("Since(9), before the first sync = %v, want ErrTooOld", err)
	}
}

func TestHistoryWindow(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	ix := New(names, Options{HistoryMaxEvents: 3, HistoryMaxAge: time.Minute, Clock: clk})
	synced(t, ix, "10")
	for rv := 11; rv <= 15; rv++ {
		ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/p"+strconv.Itoa(rv), rv, ""))})
	}
	// Kept: 13, 14, 15. Resumable from 12 (the RV before the oldest kept).
	tests := []struct {
		rv      string
		wantRVs []string
		wantErr error
	}{
		{rv: "11", wantErr: ErrTooOld},
		{rv: "12", wantRVs: []string{"13", "14", "15"}},
		{rv: "14", wantRVs: []string{"15"}},
		{rv: "15", wantRVs: []string{}},
		{rv: "abc", wantErr: ErrBadResourceVersion},
	}
	for _, tt := range tests {
		t.Run("since "+tt.rv, func(t *testing.T) {
			evs, err := since(ix, tt.rv)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Since(%s) error = %v, want %v", tt.rv, err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			got := []string{}
			for _, ev := range evs {
				got = append(got, ev.ResourceVersion)
			}
			if diff := cmp.Diff(tt.wantRVs, got); diff != "" {
				t.Errorf("Since(%s) (-want +got):\n%s", tt.rv, diff)
			}
		})
	}
	// Age: after a minute the old events go at the next apply.
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/p16", 16, ""))})
	if _, err := since(ix, "14"); !errors.Is(err, ErrTooOld) {
		t.Errorf("Since(14) after expiry = %v, want ErrTooOld", err)
	}
	if evs, err := since(ix, "15"); err != nil || len(evs) != 1 {
		t.Errorf("Since(15) after expiry = %v, %v; want the one new event", evs, err)
	}
}

func TestJoinReplaysThenFollows(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 100})
	synced(t, ix, "10")
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/p1", 11, ""))})
	rec := &recorder{}
	cancel := ix.AddListener(rec)
	var j Joined
	if err := ix.Join(Start{ResourceVersion: "10"}, func(joined Joined) { j = joined }); err != nil {
		t.Fatal(err)
	}
	if len(j.Replay) != 1 || j.Replay[0].ResourceVersion != "11" || j.At.ResourceVersion != "11" {
		t.Fatalf("Join(10) replay = %v at %s, want the event at 11", j.Replay, j.At.ResourceVersion)
	}
	ix.Apply([]deltafifo.Delta{d(watch.Deleted, pod("a/p1", 12, "")), {Type: watch.Bookmark, ResourceVersion: "13"}})
	cancel()
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/p2", 14, ""))})
	if diff := cmp.Diff([]string{"DELETED 12 a/p1", "BOOKMARK 13"}, rec.get()); diff != "" {
		t.Errorf("listener events (-want +got):\n%s", diff)
	}
}

func TestWaitFor(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	synced(t, ix, "10")
	if err := ix.WaitFor(context.Background(), "9"); err != nil {
		t.Errorf("WaitFor(9) at 10 = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- ix.WaitFor(context.Background(), "12") }()
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/x", 11, ""))})
	ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "12"}})
	if err := <-done; err != nil {
		t.Errorf("WaitFor(12) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ix.WaitFor(ctx, "99"); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFor(99) with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestJoinAheadOfCache(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	synced(t, ix, "10")
	if err := ix.Join(Start{ResourceVersion: "11"}, func(Joined) { t.Error("Join(11) called fn") }); !errors.Is(err, ErrAhead) {
		t.Errorf("Join(11) at 10 = %v, want ErrAhead", err)
	}
}

// since returns the events after rv, as a watch resuming from rv replays
// them.
func since(ix *Indexer, rv string) ([]Event, error) {
	var evs []Event
	err := ix.Join(Start{ResourceVersion: rv}, func(j Joined) { evs = j.Replay })
	return evs, err
}

func TestHistoryDropsSameRVGroupsWhole(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 3})
	synced(t, ix, "10", pod("a/x", 1, ""), pod("a/y", 2, ""))
	// A relist that found both gone: two deletes at the list's RV.
	ix.Apply([]deltafifo.Delta{
		{Type: watch.Deleted, Object: pod("a/x", 1, ""), ResourceVersion: "12", Relist: true},
		{Type: watch.Deleted, Object: pod("a/y", 2, ""), ResourceVersion: "12", Relist: true},
	})
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("a/z", 13, "")), d(watch.Added, pod("a/w", 14, ""))})
	// The ring overflowed: the first delete went, so its twin must go too.
	if _, err := since(ix, "10"); !errors.Is(err, ErrTooOld) {
		t.Errorf("Since(10) = %v, want ErrTooOld", err)
	}
	evs, err := since(ix, "12")
	if err != nil || len(evs) != 2 {
		t.Errorf("Since(12) = %d events, %v; want the two adds", len(evs), err)
	}
}

func TestListAtUndoesLaterEvents(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	synced(t, ix, "10", pod("a/keep", 1, "n1"), pod("a/chg", 2, "n1"), pod("a/del", 3, "n1"))
	ix.Apply([]deltafifo.Delta{
		d(watch.Modified, pod("a/chg", 11, "n2")),
		d(watch.Deleted, pod("a/del", 12, "n1")),
		d(watch.Added, pod("a/new", 13, "n1")),
	})
	rvs := func(s Snapshot) map[string]string {
		out := map[string]string{}
		for _, o := range s.Objects {
			out[o.Key] = o.ResourceVersion
		}
		return out
	}
	tests := []struct {
		rv      string
		want    map[string]string
		wantErr error
	}{
		{rv: "10", want: map[string]string{"a/keep": "1", "a/chg": "2", "a/del": "3"}},
		{rv: "11", want: map[string]string{"a/keep": "1", "a/chg": "11", "a/del": "3"}},
		{rv: "13", want: map[string]string{"a/keep": "1", "a/chg": "11", "a/new": "13"}},
		{rv: "99", want: map[string]string{"a/keep": "1", "a/chg": "11", "a/new": "13"}},
		{rv: "9", wantErr: ErrTooOld},
	}
	for _, tt := range tests {
		t.Run("at "+tt.rv, func(t *testing.T) {
			s, err := ix.ListAt(tt.rv, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ListAt(%s) error = %v, want %v", tt.rv, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, rvs(s)); diff != "" {
				t.Errorf("ListAt(%s) (-want +got):\n%s", tt.rv, diff)
			}
		})
	}
	// The match sees the historical state: at 10, chg was on n1.
	s, err := ix.ListAt("10", func(o *object.Object) bool { return o.Values[1][0] == "n2" })
	if err != nil || len(s.Objects) != 0 {
		t.Errorf("ListAt(10, node=n2) = %v, %v; want nothing", keys(s), err)
	}
}

// TestViewAfterSync: a view taken during the first list is not served once
// the list is complete.
func TestViewAfterSync(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("ns/a", 1, "n1"))})
	if n := ix.View().Len(); n != 1 {
		t.Fatalf("View().Len() = %d during the list, want 1", n)
	}
	synced(t, ix, "3", pod("ns/b", 2, "n1"), pod("ns/c", 3, "n1"))
	if got := keys(ix.List(nil)); !cmp.Equal(got, []string{"ns/a", "ns/b", "ns/c"}) {
		t.Errorf("List after sync = %v, want all three", got)
	}
}

// TestByIndexManyValues: an object under several of the values asked for
// is listed once.
func TestByIndexManyValues(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	synced(t, ix, "10", pod("ns/a", 1, "n1", "web", "proxy"), pod("ns/b", 2, "n1", "web"), pod("ns/c", 3, "n1", "db"))
	s, err := ix.ByIndex("image", []string{"proxy", "web", "db", "web"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(s); !cmp.Equal(got, []string{"ns/a", "ns/b", "ns/c"}) {
		t.Errorf("ByIndex = %v", got)
	}
}

// TestKeptViews: a continue page finds the view its List kept; views older
// than the history window are dropped, whatever order they were kept in.
func TestKeptViews(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 2})
	synced(t, ix, "10", pod("ns/a", 1, "n1"))
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("ns/b", 11, "n1"))})
	v11 := ix.View()
	ix.Keep(v11)
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("ns/c", 12, "n1"))})
	if _, err := ix.ViewAt("10"); err != nil { // rebuilt and kept after 11
		t.Fatal(err)
	}
	got, err := ix.ViewAt("11")
	if err != nil || got.t != v11.t {
		t.Fatalf("ViewAt(11) = %v, %v; want the kept view", got.ResourceVersion, err)
	}
	ix.Apply([]deltafifo.Delta{d(watch.Added, pod("ns/d", 13, "n1")), d(watch.Added, pod("ns/e", 14, "n1"))})
	ix.views.mu.Lock()
	defer ix.views.mu.Unlock()
	for _, v := range ix.views.kept {
		if n, _ := parseRV(v.ResourceVersion); n < ix.history.floor {
			t.Errorf("view at %s kept below the history floor %d", v.ResourceVersion, ix.history.floor)
		}
	}
	if ix.views.live != nil && ix.views.liveVersion != ix.version {
		t.Error("the live clone of an older version is still held")
	}
}

// TestCheckpointTakeBase: taking a checkpoint's base gives the objects at
// the window's start once each, in key order, in pages, and changes
// nothing the cache serves, its views included, nor a later checkpoint.
func TestCheckpointTakeBase(t *testing.T) {
	ix := New(names, Options{HistoryMaxEvents: 10})
	synced(t, ix, "10", pod("a/1", 1, "n1"), pod("a/2", 2, "n1"), pod("a/3", 3, "n1"), pod("b/4", 4, "n1"), pod("b/5", 5, "n1"))
	ix.Apply([]deltafifo.Delta{
		d(watch.Modified, pod("a/2", 11, "n2")),
		d(watch.Deleted, pod("b/4", 12, "n1")),
		d(watch.Added, pod("a/0", 13, "n1")),
	})
	view := ix.View()
	cp, err := ix.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		page := cp.TakeBase(2)
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("TakeBase(2) gave %d objects", len(page))
		}
		for _, o := range page {
			got = append(got, o.Key+"@"+o.ResourceVersion)
		}
	}
	// The base is the cache at the window's start, RV 10.
	if want := []string{"a/1@1", "a/2@2", "a/3@3", "b/4@4", "b/5@5"}; !cmp.Equal(got, want) {
		t.Errorf("the base taken = %v, want %v", got, want)
	}
	if n := cp.Base.Len(); n != 0 {
		t.Errorf("the base holds %d objects once taken, want 0", n)
	}
	want := []string{"a/0", "a/1", "a/2", "a/3", "b/5"}
	if got := keys(ix.List(nil)); !cmp.Equal(got, want) {
		t.Errorf("the cache after the base was taken = %v, want %v", got, want)
	}
	if objs, _ := view.Page("", "", 10, nil); len(objs) != len(want) {
		t.Errorf("a view taken before holds %d objects, want %d", len(objs), len(want))
	}
	again, err := ix.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if n := again.Base.Len(); n != 5 {
		t.Errorf("a later checkpoint's base holds %d objects, want 5", n)
	}
}
