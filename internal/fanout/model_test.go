package fanout

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/projection"
)

// The model test drives one hub with a random schedule of changes, relist
// groups, bookmarks, new watchers (every start and policy), partial reads,
// idle bookmarks, closes and shutdown, and checks every stream against a
// model built from the cache's own event log:
//
//   - never backwards: each message's resourceVersion is >= the one before,
//     BOOKMARKs included;
//   - no gap, no duplicate: a replaying watcher receives exactly the
//     selection's view of the events after its start, in order (a prefix of
//     it when it was ended for being slow);
//   - a coalescing watcher's messages, applied to its initial state, give
//     the selection's current state, with no ADDED of a present object and
//     no MODIFIED or DELETED of an absent one;
//   - a watcher with a field mask receives each object as the mask shows
//     it, and no MODIFIED that changes nothing the mask shows; the state
//     its messages build is the current state as the mask shows it.

// eventLog records every change the cache dispatches, in order, and the
// Seq of the last event, bookmarks included.
type eventLog struct {
	events  []indexer.Event
	lastSeq uint64
}

func (l *eventLog) OnEvent(ev indexer.Event) {
	l.lastSeq = ev.Seq
	if ev.Type != watch.Bookmark {
		l.events = append(l.events, ev)
	}
}

type modelWatcher struct {
	w    *Watcher
	opts WatchOptions
	// initial is what it must receive first; then the selection's view
	// of the logged events from index from on. Items received are in got.
	initial []Item
	from    int
	got     []Item
	// start is the selected state the watcher begins from (coalescing).
	start  map[string]string
	paths  []string // its field mask
	err    error    // how it ended, once it has
	closed bool     // closed by the client
}

type model struct {
	t      testing.TB
	rnd    *rand.Rand
	r      *rig
	log    *eventLog
	state  map[string]*object.Object // what the cache holds
	synced map[string]*object.Object // what it held at sync
	ws     []*modelWatcher
	queue  int
	nextRV int
}

func newModel(t testing.TB, seed uint64) *model {
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	queue, hist := 1+rnd.IntN(4), 3+rnd.IntN(40)
	ix := indexer.New([]string{"namespace", "node"}, indexer.Options{HistoryMaxEvents: hist})
	m := &model{t: t, rnd: rnd, log: &eventLog{}, state: map[string]*object.Object{}, queue: queue, nextRV: 100}
	var ds []deltafifo.Delta
	for i := range rnd.IntN(5) {
		o := m.pod("p"+strconv.Itoa(i), 10+i)
		m.state[o.Key] = o
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: "100", Synced: true})
	ix.Apply(ds)
	m.synced = maps.Clone(m.state)
	cancel := ix.AddListener(m.log)
	m.r = &rig{ix: ix, hub: New(ix, Options{QueueLength: queue}), rv: 100}
	if c, ok := t.(interface{ Cleanup(func()) }); ok {
		c.Cleanup(func() { m.r.hub.Close(nil); cancel() })
	}
	return m
}

func (m *model) node() string { return "n" + strconv.Itoa(m.rnd.IntN(3)) }

// pod is a pod on a random node, with a random label and phase, and a
// heartbeat that changes with every write: most writes change only
// fields some masks do not show.
func (m *model) pod(name string, rv int) *object.Object {
	o := pod(name, rv, m.node())
	app, phase := []string{"x", "y"}[m.rnd.IntN(2)], []string{"Pending", "Running"}[m.rnd.IntN(2)]
	o.Labels = object.Labels{"app", app}
	o = o.WithJSON(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":%q,"labels":{"app":%q}},"status":{"phase":%q,"heartbeat":%d}}`,
		o.Name, o.Namespace, o.UID, o.ResourceVersion, app, phase, rv))
	return o
}

// jsonOf is o's JSON; the objects of these tests are hot.
func jsonOf(o *object.Object) []byte {
	b, err := o.Bytes()
	if err != nil {
		panic(err)
	}
	return b
}

// modelMasks are the field masks watchers use; two spell one mask.
var modelMasks = [][]string{nil, {"metadata.labels"}, {"status.phase"}, {"metadata.labels", "status.phase"}, {"status.phase", "metadata.labels"}}

// modelProject is what a mask shows of o, written from the contract: the
// identity fields, and the masked ones; canonical JSON, for comparing.
func modelProject(t testing.TB, paths []string, o *object.Object) string {
	var full struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name, Namespace, UID, ResourceVersion string
			Labels                                map[string]string
		}
		Status map[string]any
	}
	if err := json.Unmarshal(jsonOf(o), &full); err != nil {
		t.Fatalf("model pod %s: %v", jsonOf(o), err)
	}
	meta := map[string]any{"name": full.Metadata.Name, "namespace": full.Metadata.Namespace, "uid": full.Metadata.UID, "resourceVersion": full.Metadata.ResourceVersion}
	out := map[string]any{"apiVersion": full.APIVersion, "kind": full.Kind, "metadata": meta}
	for _, p := range paths {
		switch p {
		case "metadata.labels":
			meta["labels"] = full.Metadata.Labels
		case "status.phase":
			out["status"] = map[string]any{"phase": full.Status["phase"]}
		}
	}
	if paths == nil {
		return canonical(t, jsonOf(o))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// canonical is JSON with its keys sorted.
func canonical(t testing.TB, b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// visible is what a mask shows of o, but its resourceVersion.
func visible(t testing.TB, paths []string, o *object.Object) string {
	if paths == nil {
		return o.ResourceVersion
	}
	var v map[string]any
	_ = json.Unmarshal([]byte(modelProject(t, paths, o)), &v)
	delete(v["metadata"].(map[string]any), "resourceVersion")
	b, _ := json.Marshal(v)
	return string(b)
}

func (m *model) rv() string {
	m.nextRV += 1 + m.rnd.IntN(2)
	return strconv.Itoa(m.nextRV)
}

func (m *model) keys() []string {
	ks := make([]string, 0, len(m.state))
	for k := range m.state {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// change applies one add, update or delete.
func (m *model) change() {
	name := "p" + strconv.Itoa(m.rnd.IntN(8))
	rv := m.rv()
	n, _ := strconv.Atoi(rv)
	o := m.pod(name, n)
	typ := watch.Added
	if _, ok := m.state[o.Key]; ok {
		typ = watch.Modified
		if m.rnd.IntN(3) == 0 {
			typ = watch.Deleted
		}
	}
	if typ == watch.Deleted {
		delete(m.state, o.Key)
	} else {
		m.state[o.Key] = o
	}
	m.r.ix.Apply([]deltafifo.Delta{{Type: typ, Object: o, ResourceVersion: rv}})
}

// relist applies what a relist's diff yields, in one batch as the queue
// pops it: deletes that share one resourceVersion (the list's, or an older
// one a bookmark has passed, which then take the cache's).
func (m *model) relist() {
	keys := m.keys()
	if len(keys) == 0 {
		return
	}
	m.rnd.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	keys = keys[:1+m.rnd.IntN(len(keys))]
	rv := m.rv()
	if m.rnd.IntN(3) == 0 {
		rv = strconv.Itoa(m.nextRV - 5) // older than the cache: takes the cache's RV
	}
	var ds []deltafifo.Delta
	for _, k := range keys {
		ds = append(ds, deltafifo.Delta{Type: watch.Deleted, Object: m.state[k], ResourceVersion: rv, Relist: true})
		delete(m.state, k)
	}
	m.r.ix.Apply(ds)
}

func (m *model) bookmark() {
	m.r.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: m.rv()}})
}

var modelSelections = []Selection{
	{Index: -1},
	{Index: 1, Values: []string{"n0"}},
	{Index: 1, Values: []string{"n0", "n2"}},
	{Namespace: "ns", Index: -1},
	{Namespace: "other", Index: -1},
}

// watch starts a watcher from now, from its initial events, or from a
// resourceVersion the history may or may not still hold.
func (m *model) watch() {
	opts := WatchOptions{
		Selection:      modelSelections[m.rnd.IntN(len(modelSelections))],
		AllowBookmarks: m.rnd.IntN(2) == 0,
		Coalesce:       m.rnd.IntN(4) == 0,
	}
	mw := &modelWatcher{opts: opts, start: map[string]string{}, paths: modelMasks[m.rnd.IntN(len(modelMasks))]}
	mask, err := projection.Compile(mw.paths)
	if err != nil {
		m.t.Fatal(err)
	}
	opts.Mask = mask
	from := len(m.log.events)
	switch m.rnd.IntN(3) {
	case 0:
		opts.SendInitialEvents = true
		for _, k := range m.keys() {
			if o := m.state[k]; opts.Selection.Matches(o) {
				mw.initial = append(mw.initial, Item{Type: watch.Added, Object: o})
				mw.start[k] = visible(m.t, mw.paths, o)
			}
		}
	case 1:
		cur, _ := strconv.Atoi(m.r.ix.Stats().ResourceVersion)
		rv := 95 + m.rnd.IntN(cur-94)
		opts.ResourceVersion = strconv.Itoa(rv)
		from = len(m.log.events)
		for from > 0 && m.log.events[from-1].RV > uint64(rv) {
			from--
		}
		// The client holds the state at rv: what was synced, changed by
		// the events up to it.
		state := maps.Clone(m.synced)
		for _, ev := range m.log.events[:from] {
			if ev.Type == watch.Deleted {
				delete(state, ev.Object.Key)
			} else {
				state[ev.Object.Key] = ev.Object
			}
		}
		for k, o := range state {
			if opts.Selection.Matches(o) {
				mw.start[k] = visible(m.t, mw.paths, o)
			}
		}
	}
	if !opts.SendInitialEvents && opts.ResourceVersion == "" {
		for _, k := range m.keys() {
			if o := m.state[k]; opts.Selection.Matches(o) {
				mw.start[k] = visible(m.t, mw.paths, o)
			}
		}
	}
	w, initial, at, err := m.r.hub.Watch(opts)
	if errors.Is(err, indexer.ErrTooOld) {
		if rv, _ := strconv.ParseUint(opts.ResourceVersion, 10, 64); rv >= m.r.ix.Stats().HistoryFloor {
			m.t.Fatalf("Watch from %d refused as too old, but the history floor is %d", rv, m.r.ix.Stats().HistoryFloor)
		}
		return
	}
	if err != nil {
		m.t.Fatalf("Watch(%+v): %v", opts, err)
	}
	for i := range mw.initial {
		mw.initial[i].ResourceVersion = at
	}
	mw.w, mw.opts, mw.got, mw.from = w, opts, initial, from
	m.ws = append(m.ws, mw)
}

// modelTranslate is the selection's view of ev, written from the contract
// rather than from the hub's code.
func modelTranslate(s Selection, ev indexer.Event) (Item, bool) {
	was := ev.Prev != nil && s.Matches(ev.Prev)
	is := ev.Type != watch.Deleted && s.Matches(ev.Object)
	it := Item{Object: ev.Object, ResourceVersion: ev.ResourceVersion}
	switch {
	case was && is:
		it.Type = watch.Modified
	case is:
		it.Type = watch.Added
	case was:
		it.Type = watch.Deleted
	default:
		return Item{}, false
	}
	return it, true
}

// read takes what a watcher has ready: one batch, or all of it; after all
// of it, an idle stream may ask for a bookmark as the server does.
func (m *model) read(mw *modelWatcher, all bool) {
	if mw.err != nil {
		return
	}
	for {
		items, err := mw.w.Poll()
		if err == nil && len(items) == 0 {
			// Asked whether bookmarks are allowed or not: a watcher that
			// does not allow them must not offer one.
			if all && m.rnd.IntN(2) == 0 {
				if it, ok := mw.w.IdleBookmark(); ok {
					mw.got = append(mw.got, it)
				}
			}
			return
		}
		if err != nil {
			mw.err = err
			return
		}
		mw.got = append(mw.got, items...)
		if !all {
			return
		}
	}
}

func (m *model) run(steps int) {
	for range steps {
		switch p := m.rnd.IntN(100); {
		case p < 35:
			m.change()
		case p < 40:
			m.relist()
		case p < 50:
			m.bookmark()
		case p < 58 && len(m.ws) < 8:
			m.watch()
		case p < 97 && len(m.ws) > 0:
			m.read(m.ws[m.rnd.IntN(len(m.ws))], m.rnd.IntN(2) == 0)
		case len(m.ws) > 0:
			mw := m.ws[m.rnd.IntN(len(m.ws))]
			if mw.err == nil {
				mw.w.Close()
				mw.closed = true
				m.read(mw, true)
			}
		}
	}
	for _, mw := range m.ws {
		m.read(mw, true)
	}
	for i, mw := range m.ws {
		m.check(i, mw)
	}
	m.r.hub.Close(nil)
	for _, mw := range m.ws {
		if mw.err == nil {
			m.read(mw, true)
			if !errors.Is(mw.err, ErrClosed) {
				m.t.Errorf("after shutdown, Next = %v, want ErrClosed", mw.err)
			}
		}
	}
}

func (m *model) check(i int, mw *modelWatcher) {
	m.t.Helper()
	name := fmt.Sprintf("watcher %d (%+v, queue %d)", i, mw.opts, m.queue)
	var prev uint64
	for j, it := range mw.got {
		n, err := strconv.ParseUint(it.ResourceVersion, 10, 64)
		if err != nil {
			m.t.Fatalf("%s: message %d has resourceVersion %q", name, j, it.ResourceVersion)
		}
		if n < prev {
			m.t.Fatalf("%s: message %d went back from %d to %d:\n%s", name, j, prev, n, strings.Join(render(mw.got), "\n"))
		}
		prev = n
		if it.Type == watch.Bookmark && !mw.opts.AllowBookmarks {
			m.t.Fatalf("%s: a BOOKMARK it did not ask for", name)
		}
	}
	var tooSlow *TooSlowError
	// The client resumes from where a slow watcher ended: the last message
	// sent, or where it started when it sent none.
	if want := lastRV(mw.got); errors.As(mw.err, &tooSlow) && (want != "" || mw.opts.ResourceVersion != "") {
		if want == "" {
			want = mw.opts.ResourceVersion
		}
		if tooSlow.LastResourceVersion != want {
			m.t.Errorf("%s: ended at %s, but the client is at %s", name, tooSlow.LastResourceVersion, want)
		}
	}
	got := withoutBookmarks(mw.got)
	if mw.opts.Coalesce {
		m.checkCoalesced(name, mw, got)
		return
	}
	want := m.renderAs(mw.paths, mw.initial)
	for _, ev := range m.log.events[mw.from:] {
		it, ok := modelTranslate(mw.opts.Selection, ev)
		if ok && it.Type == watch.Modified && visible(m.t, mw.paths, ev.Prev) == visible(m.t, mw.paths, ev.Object) {
			ok = false // a change the mask does not show
		}
		if ok {
			want = append(want, m.renderAs(mw.paths, []Item{it})...)
		}
	}
	if mw.err != nil || mw.closed {
		// Ended early: what it got must be where the stream was going.
		want = want[:min(len(want), len(got))]
	}
	if diff := cmp.Diff(want, m.renderAs(nil, got), cmpopts.EquateEmpty()); diff != "" {
		m.t.Fatalf("%s (err %v): items (-want +got):\n%s", name, mw.err, diff)
	}
}

func (m *model) checkCoalesced(name string, mw *modelWatcher, got []Item) {
	state := maps.Clone(mw.start)
	if mw.opts.SendInitialEvents {
		state = map[string]string{}
	}
	for _, it := range got {
		_, present := state[it.Object.Key]
		switch {
		case it.Type == watch.Added && present, it.Type != watch.Added && !present:
			m.t.Fatalf("%s: %s of %s, which the client %s", name, it.Type, it.Object.Key,
				map[bool]string{true: "already has", false: "does not have"}[present])
		case it.Type == watch.Deleted:
			delete(state, it.Object.Key)
		default:
			state[it.Object.Key] = visible(m.t, mw.paths, it.Object)
		}
	}
	if mw.err != nil || mw.closed {
		return
	}
	want := map[string]string{}
	for k, o := range m.state {
		if mw.opts.Selection.Matches(o) {
			want[k] = visible(m.t, mw.paths, o)
		}
	}
	if diff := cmp.Diff(want, state); diff != "" {
		m.t.Fatalf("%s: state after its messages (-want +got):\n%s", name, diff)
	}
}

// renderAs renders items with their objects as paths show them (as they
// are, when paths is nil), for comparing with what a watcher received.
func (m *model) renderAs(paths []string, items []Item) []string {
	out := render(items)
	for i, it := range items {
		if it.Object != nil {
			if paths != nil {
				out[i] += " " + modelProject(m.t, paths, it.Object)
			} else {
				out[i] += " " + canonical(m.t, jsonOf(it.Object))
			}
		}
	}
	return out
}

func lastRV(items []Item) string {
	if len(items) == 0 {
		return ""
	}
	return items[len(items)-1].ResourceVersion
}

func withoutBookmarks(items []Item) []Item {
	var out []Item
	for _, it := range items {
		if it.Type != watch.Bookmark {
			out = append(out, it)
		}
	}
	return out
}

// TestModel runs the model over many random schedules; a failure names its
// seed, which FuzzModel replays.
func TestModel(t *testing.T) {
	seeds := 1000
	if testing.Short() {
		seeds = 300
	}
	for seed := range uint64(seeds) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			newModel(t, seed).run(150)
		})
	}
}

// FuzzModel lets the fuzzer choose schedules (through the seed of the
// random source) and their length.
func FuzzModel(f *testing.F) {
	f.Add(uint64(1), uint8(100))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		newModel(t, seed).run(int(steps) + 20)
	})
}
