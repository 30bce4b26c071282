package fanout

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(name string, rv int, node string) *object.Object {
	return &object.Object{
		Key: "ns/" + name, Namespace: "ns", Name: name, UID: "u-" + name,
		ResourceVersion: strconv.Itoa(rv), RV: uint64(rv),
		Values: [][]string{{"ns"}, {node}},
	}
}

type rig struct {
	ix  *indexer.Indexer
	hub *Hub
	rv  int
}

func newRig(t *testing.T, queueLen, history int, objs ...*object.Object) *rig {
	ix := indexer.New([]string{"namespace", "node"}, indexer.Options{HistoryMaxEvents: history})
	var ds []deltafifo.Delta
	for _, o := range objs {
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: "100", Synced: true})
	ix.Apply(ds)
	r := &rig{ix: ix, hub: New(ix, Options{QueueLength: queueLen}), rv: 100}
	t.Cleanup(func() { r.hub.Close(nil) })
	return r
}

func (r *rig) apply(typ watch.EventType, name, node string) {
	r.rv++
	o := pod(name, r.rv, node)
	r.ix.Apply([]deltafifo.Delta{{Type: typ, Object: o, ResourceVersion: o.ResourceVersion}})
}

func render(items []Item) []string {
	var out []string
	for _, it := range items {
		s := string(it.Type) + " " + it.ResourceVersion
		if it.Object != nil {
			s += " " + it.Object.Name
		}
		out = append(out, s)
	}
	return out
}

func onNode(node string) Selection { return Selection{Index: 1, Values: []string{node}} }

func drain(t *testing.T, w *Watcher) []Item {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Next returns what is ready, then ctx's error
	var out []Item
	for {
		items, err := w.Next(ctx)
		if err != nil {
			return out
		}
		out = append(out, items...)
	}
}

func TestSelectionTransitions(t *testing.T) {
	r := newRig(t, 100, 100, pod("a", 1, "n1"), pod("b", 2, "n2"))
	w, initial, at, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), SendInitialEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ADDED 100 a"}, render(initial)); diff != "" || at != "100" {
		t.Errorf("initial at %s (-want +got):\n%s", at, diff)
	}
	r.apply(watch.Modified, "a", "n1") // 101 stays: MODIFIED
	r.apply(watch.Modified, "a", "n2") // 102 leaves: DELETED
	r.apply(watch.Modified, "b", "n2") // 103 not ours: nothing
	r.apply(watch.Modified, "b", "n1") // 104 enters: ADDED
	r.apply(watch.Added, "c", "n3")    // 105 not ours
	r.apply(watch.Deleted, "b", "n1")  // 106 DELETED
	want := []string{"MODIFIED 101 a", "DELETED 102 a", "ADDED 104 b", "DELETED 106 b"}
	if diff := cmp.Diff(want, render(drain(t, w))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestOnlyCandidatesAreVisited(t *testing.T) {
	r := newRig(t, 10, 10)
	var ws []*Watcher
	for i := range 50 {
		w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n" + strconv.Itoa(i))})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	all, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
	if err != nil {
		t.Fatal(err)
	}
	r.hub.mu.Lock()
	r.hub.candidatesLocked(indexer.Event{Type: watch.Modified, Prev: pod("x", 1, "n3"), Object: pod("x", 2, "n7"), Seq: 1})
	got := len(r.hub.targets)
	r.hub.mu.Unlock()
	if got != 3 {
		t.Errorf("candidates for a move n3 -> n7 = %d, want 3 (n3, n7 and the unfiltered watcher)", got)
	}
	all.Close()
	for _, w := range ws {
		w.Close()
	}
	if n := watchers(r.hub); n != 0 {
		t.Errorf("hub still holds %d watchers after Close", n)
	}
}

func TestResumeFromResourceVersion(t *testing.T) {
	r := newRig(t, 100, 100)
	r.apply(watch.Added, "a", "n1") // 101
	r.apply(watch.Added, "b", "n1") // 102
	w, initial, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), ResourceVersion: "101"})
	if err != nil {
		t.Fatal(err)
	}
	r.apply(watch.Added, "c", "n1") // 103
	got := render(append(initial, drain(t, w)...))
	if diff := cmp.Diff([]string{"ADDED 102 b", "ADDED 103 c"}, got); diff != "" {
		t.Errorf("resumed items (-want +got):\n%s", diff)
	}
	if _, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), ResourceVersion: "50"}); !errors.Is(err, indexer.ErrTooOld) {
		t.Errorf("Watch from 50 = %v, want ErrTooOld", err)
	}
}

func TestSlowWatcherIsReplayedFromHistory(t *testing.T) {
	r := newRig(t, 2, 100)
	slow, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
	if err != nil {
		t.Fatal(err)
	}
	fast, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var want, fastGot []string
	for i := range 6 {
		r.apply(watch.Added, "p"+strconv.Itoa(i), "n1")
		want = append(want, "ADDED "+strconv.Itoa(101+i)+" p"+strconv.Itoa(i))
		fastGot = append(fastGot, render(drain(t, fast))...)
	}
	if diff := cmp.Diff(want, fastGot); diff != "" {
		t.Errorf("fast watcher (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, render(drain(t, slow))); diff != "" {
		t.Errorf("slow watcher, replayed (-want +got):\n%s", diff)
	}
}

func TestWatcherOutOfTheWindowIsEnded(t *testing.T) {
	r := newRig(t, 1, 2)
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r.apply(watch.Added, "p"+strconv.Itoa(i), "n1")
	}
	items, err := w.Next(context.Background()) // the one queued item
	if err != nil || len(items) != 1 {
		t.Fatalf("first Next = %v, %v", render(items), err)
	}
	_, err = w.Next(context.Background())
	var tooSlow *TooSlowError
	if !errors.As(err, &tooSlow) || tooSlow.LastResourceVersion != "101" {
		t.Fatalf("Next = %v, want TooSlowError at 101", err)
	}
	if n := watchers(r.hub); n != 0 {
		t.Errorf("ended watcher still registered (%d)", n)
	}
}

func TestCoalescingWatcherKeepsLatestPerObject(t *testing.T) {
	r := newRig(t, 1, 1, pod("x", 1, "n1"), pod("gone", 2, "n1"))
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}, Coalesce: true})
	if err != nil {
		t.Fatal(err)
	}
	r.apply(watch.Modified, "x", "n1")   // 101
	r.apply(watch.Added, "a", "n1")      // 102
	r.apply(watch.Modified, "a", "n1")   // 103: ADDED absorbs it
	r.apply(watch.Added, "tmp", "n1")    // 104
	r.apply(watch.Deleted, "tmp", "n1")  // 105: cancels the add
	r.apply(watch.Modified, "x", "n1")   // 106: MODIFIED moves to the back
	r.apply(watch.Deleted, "gone", "n1") // 107
	if st := r.hub.Stats(); st.Watchers != 1 || st.MaxQueueDepth != 3 || st.Coalesced != 3 {
		t.Errorf("Stats() = %+v, want 1 watcher, depth 3, 3 changes absorbed", st)
	}
	want := []string{"ADDED 103 a", "MODIFIED 106 x", "DELETED 107 gone"}
	if diff := cmp.Diff(want, render(drain(t, w))); diff != "" {
		t.Errorf("coalesced (-want +got):\n%s", diff)
	}
}

func TestBookmarks(t *testing.T) {
	r := newRig(t, 10, 10)
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	noBookmarks, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1")})
	if err != nil {
		t.Fatal(err)
	}
	defer noBookmarks.Close()
	r.apply(watch.Added, "other", "n2") // 101, not ours
	r.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "150"}})
	if diff := cmp.Diff([]string{"BOOKMARK 150"}, render(drain(t, w))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if _, ok := w.IdleBookmark(); ok {
		t.Error("IdleBookmark() offered one with nothing new since the last")
	}
	r.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "160"}})
	drain(t, w)
	r.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "170"}})
	if _, ok := noBookmarks.IdleBookmark(); ok {
		t.Error("IdleBookmark() offered one to a watch that does not allow bookmarks")
	}
}

func TestCloseEndsWatchers(t *testing.T) {
	r := newRig(t, 10, 10)
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}})
	if err != nil {
		t.Fatal(err)
	}
	r.hub.Close(nil)
	if _, err := w.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after hub Close = %v, want ErrClosed", err)
	}
	if _, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close = %v, want ErrClosed", err)
	}
}

// TestCoalescingResumeIsNeverTooSlow: a COALESCE watch resumed from a
// resourceVersion is not ended when the history moves on while its client
// reads; its resume went into its queue at once.
func TestCoalescingResumeIsNeverTooSlow(t *testing.T) {
	r := newRig(t, 10, 600)
	for i := range 500 {
		r.apply(watch.Added, "p"+strconv.Itoa(i), "n1")
	}
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1}, ResourceVersion: "100", Coalesce: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		r.apply(watch.Modified, "p"+strconv.Itoa(i), "n1")
	}
	items := drain(t, w)
	if len(items) != 500 {
		t.Fatalf("got %d items, want one per object (500)", len(items))
	}
	if _, err := w.Next(canceled()); !errors.Is(err, context.Canceled) {
		t.Errorf("Next = %v, want the watch still open", err)
	}
}

// TestResumeOutOfTheWindowIsTooOld: a watch resumed from a resourceVersion
// whose events leave the history before it sent anything is refused as too
// old (list again), not ended as a slow stream to resume from there.
func TestResumeOutOfTheWindowIsTooOld(t *testing.T) {
	r := newRig(t, 1000, 300)
	for i := range 290 {
		r.apply(watch.Added, "p"+strconv.Itoa(i), "n1")
	}
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n2"), ResourceVersion: "100"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		r.apply(watch.Modified, "p"+strconv.Itoa(i%290), "n1")
	}
	_, err = w.Next(context.Background())
	var tooSlow *TooSlowError
	if !errors.Is(err, indexer.ErrTooOld) || errors.As(err, &tooSlow) {
		t.Errorf("Next = %v, want ErrTooOld", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// watchers is the number of watchers registered with h.
func watchers(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

// blockingListener holds the dispatch at its first event until released.
type blockingListener struct {
	reached, release chan struct{}
	once             bool
}

func (l *blockingListener) OnEvent(indexer.Event) {
	if !l.once {
		l.once = true
		close(l.reached)
		<-l.release
	}
}

// TestNoIdleBookmarkInsideAGroup: a relist's deletes share one
// resourceVersion; a watcher that has passed the first (not selected) but
// not the next (selected) must not be offered a bookmark at that
// resourceVersion, or a client resuming from it would miss the next.
func TestNoIdleBookmarkInsideAGroup(t *testing.T) {
	web := func(o *object.Object) *object.Object { o.Labels = object.Labels{"app", "web"}; return o }
	r := newRig(t, 100, 100, pod("x", 1, "n2"), web(pod("y", 2, "n1")))
	// Selecting by label, the watcher is told of every change, and passes
	// over those it does not select.
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: Selection{Index: -1, Labels: labels.SelectorFromSet(labels.Set{"app": "web"})}, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	l := &blockingListener{reached: make(chan struct{}), release: make(chan struct{})}
	cancel := r.ix.AddListener(l)
	defer cancel()
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		r.ix.Apply([]deltafifo.Delta{
			{Type: watch.Deleted, Object: pod("x", 1, "n2"), ResourceVersion: "200", Relist: true},
			{Type: watch.Deleted, Object: web(pod("y", 2, "n1")), ResourceVersion: "200", Relist: true},
		})
	}()
	<-l.reached // the hub has told the watcher of x's delete, not yet y's
	if it, ok := w.IdleBookmark(); ok {
		t.Errorf("inside the group at 200: IdleBookmark offered %v; a client resuming from it would miss y's delete", it)
	}
	close(l.release)
	<-applied
	if diff := cmp.Diff([]string{"DELETED 200 y"}, render(drain(t, w))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}
