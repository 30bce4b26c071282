package indexer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/object/objecttest"
)

// This file tests compression in the store (cool.go) against a model: a
// map of what an indexer that never compresses would hold.

// coolNames are the indexes of the model's objects.
var coolNames = []string{"namespace", "node"}

// modelObj is one object of the model: its JSON and what indexes it.
type modelObj struct {
	rv   uint64
	node string
	json []byte
}

// coolPodJSON returns the JSON of a pod like those of one fleet: each
// differs in its name, resourceVersion, node, image and a few more fields.
func coolPodJSON(rng *rand.Rand, key string, rv uint64, node string) []byte {
	ns, name := object.SplitKey(key)
	app := []string{"web", "api", "worker"}[rng.IntN(3)]
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"uid":"uid-%s","resourceVersion":"%d",`+
		`"labels":{"app":%q,"pod-template-hash":"%05x"},"annotations":{"prometheus.io/scrape":"true"},`+
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"%s-%05x","controller":true}]},`+
		`"spec":{"nodeName":%q,"restartPolicy":"Always","dnsPolicy":"ClusterFirst","serviceAccountName":"default",`+
		`"containers":[{"name":%q,"image":"registry.example.com/%s:v1.%d","ports":[{"containerPort":8080,"protocol":"TCP"}],`+
		`"resources":{"requests":{"cpu":"%dm","memory":"128Mi"}},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],`+
		`"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},`+
		`"status":{"phase":"Running","podIP":"10.0.%d.%d","qosClass":"Burstable","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}],`+
		`"containerStatuses":[{"name":%q,"ready":true,"restartCount":%d,"containerID":"containerd://%016x"}]}}`,
		name, ns, name, rv, app, rng.IntN(1<<20), app, rng.IntN(1<<20), node, app, app, rng.IntN(30),
		100*(1+rng.IntN(8)), rng.IntN(256), rng.IntN(256), app, rng.IntN(4), rng.Uint64())
}

// coolObj is the cached form of m at key, hot.
func coolObj(key string, m modelObj) *object.Object {
	ns, name := object.SplitKey(key)
	o := &object.Object{
		Key: key, Namespace: ns, Name: name, UID: "uid-" + key,
		ResourceVersion: strconv.FormatUint(m.rv, 10), RV: m.rv,
		Values: [][]string{{ns}, {m.node}},
	}
	return o.WithJSON(m.json)
}

// damaging is a Cooler that makes a damaged cold copy of the object at
// key, and of no other.
type damaging struct {
	codec *object.Codec
	key   string
}

func (d damaging) Compress(o *object.Object) (*object.Object, error) {
	if o.Key != d.key {
		return nil, errors.New("not the one to damage")
	}
	c, err := d.codec.Compress(o)
	if err != nil {
		return nil, err
	}
	return objecttest.Corrupt(c), nil
}

func (d damaging) Stale(o *object.Object) bool { return o.Key == d.key }

// chooser picks the model's next step: a seeded rand or fuzz bytes.
type chooser interface {
	IntN(n int) int
	done() bool
}

type rngChooser struct {
	*rand.Rand
	left int
}

func (r *rngChooser) done() bool { r.left--; return r.left < 0 }

// byteChooser reads its choices from fuzz bytes, then ends.
type byteChooser struct{ b []byte }

func (c *byteChooser) IntN(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

func (c *byteChooser) done() bool { return len(c.b) == 0 }

// coolModel drives an indexer, its queue and a codec, and what they must
// answer.
type coolModel struct {
	t     testing.TB
	pick  chooser
	json  *rand.Rand // makes the objects' JSON
	clock *clocktesting.FakeClock
	ix    *Indexer
	fifo  *deltafifo.FIFO
	codec *object.Codec

	rv    uint64
	objs  map[string]modelObj
	snaps map[string]map[string]modelObj // state after each batch, by the cache's resourceVersion
	// damaged holds the keys whose cached object was damaged, and found so
	// by a read: the next relist repairs them.
	damaged map[string]bool
	// wasDamaged holds the key and resourceVersion of every object
	// damaged: a view of the past, or an event's Prev, may still hold it.
	wasDamaged map[string]bool

	mu     sync.Mutex
	events []Event // told to the listener by the batch being applied

	// Figures over the run, so that it cannot pass without compressing.
	cooled, recompressed, stale, repaired, coldReads int
}

const (
	coolKeys       = 20
	coolHistory    = 12
	coolHistoryAge = time.Minute
)

func (m *coolModel) OnEvent(ev Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, ev)
}

func newCoolModel(t testing.TB, pick chooser) *coolModel {
	m := &coolModel{
		t: t, pick: pick, json: rand.New(rand.NewPCG(1, 2)),
		clock:   clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		codec:   object.NewCodec(object.CodecOptions{MaxDictBytes: 4 << 10}),
		rv:      100,
		objs:    map[string]modelObj{},
		snaps:   map[string]map[string]modelObj{},
		damaged: map[string]bool{}, wasDamaged: map[string]bool{},
	}
	m.ix = New(coolNames, Options{HistoryMaxEvents: coolHistory, HistoryMaxAge: coolHistoryAge, Clock: m.clock})
	m.fifo = deltafifo.New(m.ix, 8)
	m.codec.OnDamage(func(o *object.Object, _ error) { m.ix.MarkDamaged(o) })
	m.ix.AddListener(m)
	// The first list.
	for range 1 + pick.IntN(coolKeys) {
		k := m.key()
		m.objs[k] = m.newObj(k)
	}
	m.relistWith(m.listOf(m.objs))
	if err := m.codec.Train(m.samples()); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *coolModel) key() string {
	i := m.pick.IntN(coolKeys)
	return fmt.Sprintf("ns%d/p%02d", i%3, i)
}

func (m *coolModel) newObj(key string) modelObj {
	m.rv += 1 + uint64(m.pick.IntN(3))
	node := fmt.Sprintf("node-%d", m.pick.IntN(4))
	return modelObj{rv: m.rv, node: node, json: coolPodJSON(m.json, key, m.rv, node)}
}

// apply pushes fn's entry through the queue and the indexer, then checks
// the events the listener was told against the model's change (before →
// m.objs), and records the state.
func (m *coolModel) apply(before map[string]modelObj, push func() error) {
	m.t.Helper()
	if err := push(); err != nil {
		m.t.Fatal(err)
	}
	ds, err := m.fifo.Pop(context.Background())
	if err != nil {
		m.t.Fatal(err)
	}
	m.ix.Apply(ds)
	m.mu.Lock()
	evs := m.events
	m.events = nil
	m.mu.Unlock()
	want := map[string]watch.EventType{}
	for k, o := range m.objs {
		if b, ok := before[k]; !ok {
			want[k] = watch.Added
		} else if b.rv != o.rv {
			want[k] = watch.Modified
		}
	}
	for k := range before {
		if _, ok := m.objs[k]; !ok {
			want[k] = watch.Deleted
		}
	}
	got := map[string]watch.EventType{}
	for _, ev := range evs {
		if ev.Type == watch.Bookmark {
			continue
		}
		got[ev.Object.Key] = ev.Type
		m.checkEventObject("live event", ev, before)
	}
	if len(m.snaps) > 0 { // the first list tells no one
		if diff := cmp.Diff(want, got); diff != "" {
			m.t.Fatalf("events told (-want +got):\n%s", diff)
		}
	}
	m.snaps[m.ix.Stats().ResourceVersion] = maps(m.objs)
}

// checkEventObject checks that ev carries a hot object with the JSON the
// model says: the new state, or the last one of a delete (from before).
func (m *coolModel) checkEventObject(what string, ev Event, before map[string]modelObj) {
	m.t.Helper()
	if ev.Object.Cold() {
		m.t.Fatalf("%s %s %s carries a cold object", what, ev.Type, ev.Object.Key)
	}
	if before == nil {
		return
	}
	want := m.objs[ev.Object.Key].json
	if ev.Type == watch.Deleted {
		want = before[ev.Object.Key].json
	}
	if got, _ := ev.Object.Bytes(); !bytes.Equal(got, want) {
		m.t.Fatalf("%s %s %s: JSON differs from the model's", what, ev.Type, ev.Object.Key)
	}
}

func maps(in map[string]modelObj) map[string]modelObj {
	out := make(map[string]modelObj, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func (m *coolModel) listOf(objs map[string]modelObj) []*object.Object {
	var out []*object.Object
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range objs {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, coolObj(k, objs[k]))
	}
	return out
}

// relistWith lists list (the model's objects, already updated) at a new
// resourceVersion, through the queue's Replace as the reflector does.
func (m *coolModel) relistWith(list []*object.Object) {
	m.t.Helper()
	before := maps(m.snapBefore())
	m.rv++
	for _, o := range list {
		if m.damaged[o.Key] {
			// Repaired: no view of the past nor event holds the damaged
			// copy any more.
			m.repaired++
			delete(m.wasDamaged, o.Key+"@"+o.ResourceVersion)
		}
	}
	m.apply(before, func() error { return m.fifo.Replace(list, strconv.FormatUint(m.rv, 10)) })
	clear(m.damaged)
}

// snapBefore is the state before the next batch.
func (m *coolModel) snapBefore() map[string]modelObj {
	if s, ok := m.snaps[m.ix.Stats().ResourceVersion]; ok {
		return s
	}
	return map[string]modelObj{}
}

// step does one thing to the cache, as the model chooses.
func (m *coolModel) step() {
	m.t.Helper()
	before := m.snapBefore()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m.objs {
			if !yield(k) {
				return
			}
		}
	})
	switch op := m.pick.IntN(13); {
	case op < 3: // an add or an update from the watch
		k := m.key()
		_, had := m.objs[k]
		m.objs[k] = m.newObj(k)
		delete(m.damaged, k)
		o := coolObj(k, m.objs[k])
		m.apply(before, func() error {
			if had {
				return m.fifo.Update(o)
			}
			return m.fifo.Add(o)
		})
	case op == 3 && len(keys) > 0: // a delete from the watch: its final state
		k := keys[m.pick.IntN(len(keys))]
		last := m.objs[k]
		delete(m.objs, k)
		delete(m.damaged, k)
		m.rv++
		final := coolObj(k, modelObj{rv: m.rv, node: last.node, json: last.json})
		m.apply(before, func() error { return m.fifo.Delete(final) })
	case op == 4: // a relist: a few changes missed, most objects the same
		for range m.pick.IntN(4) {
			k := m.key()
			if m.damaged[k] {
				continue
			}
			if _, ok := m.objs[k]; ok && m.pick.IntN(2) == 0 {
				delete(m.objs, k)
			} else {
				m.objs[k] = m.newObj(k)
			}
		}
		m.relistWith(m.listOf(m.objs))
	case op == 5: // the history window moves on: every event expires
		m.clock.Step(coolHistoryAge + time.Second)
		m.rv++
		m.apply(before, func() error { return m.fifo.Bookmark(strconv.FormatUint(m.rv, 10)) })
	case op < 9: // a cooling step
		st := m.ix.Cool(m.codec, 1+m.pick.IntN(4))
		m.cooled += st.Cooled
		m.recompressed += st.Recompressed
		m.stale += st.Stale
		if st.Cooled+st.Recompressed > st.Scanned || st.Recompressed > st.Stale {
			m.t.Fatalf("Cool = %+v", st)
		}
	case op == 9: // a new dictionary, trained on the cache
		if err := m.codec.Train(m.samples()); err != nil {
			m.t.Fatal(err)
		}
	case op == 10 && len(keys) > 0: // a cold object's bytes are damaged, and a reader finds it
		k := keys[m.pick.IntN(len(keys))]
		o, _ := m.ix.Get(k)
		if !o.Cold() || m.damaged[k] {
			break
		}
		d := damaging{codec: m.codec, key: k}
		for range 2 {
			if st := m.ix.Cool(d, coolKeys); st.Recompressed+st.Cooled > 0 {
				break
			}
		}
		got, _ := m.ix.Get(k)
		if got == o {
			m.t.Fatalf("%s was not replaced by a damaged copy", k)
		}
		if _, err := got.Bytes(); !errors.Is(err, object.ErrDamaged) {
			m.t.Fatalf("read of damaged %s: %v, want ErrDamaged", k, err)
		}
		if !m.ix.Damaged(got) {
			m.t.Fatalf("%s found damaged and not marked so", k)
		}
		m.damaged[k] = true
		m.wasDamaged[k+"@"+got.ResourceVersion] = true
	case op == 11: // a cooling step while the first object it compresses changes
		rc := &racing{Codec: m.codec}
		rc.during = func(o *object.Object) {
			k := o.Key
			before := m.snapBefore()
			m.objs[k] = m.newObj(k)
			delete(m.damaged, k)
			changed := coolObj(k, m.objs[k])
			m.apply(before, func() error { return m.fifo.Update(changed) })
		}
		m.ix.Cool(rc, 1+m.pick.IntN(4))
	default:
		m.rv++
		m.apply(before, func() error { return m.fifo.Bookmark(strconv.FormatUint(m.rv, 10)) })
	}
	m.check()
}

// racing is the codec, but the first object it compresses is changed
// meanwhile, as the watch would between Cool's read and its swap.
type racing struct {
	*object.Codec
	during func(o *object.Object)
}

func (r *racing) Compress(o *object.Object) (*object.Object, error) {
	if fn := r.during; fn != nil {
		r.during = nil
		fn(o)
	}
	return r.Codec.Compress(o)
}

func (m *coolModel) samples() [][]byte {
	var out [][]byte
	for _, o := range m.ix.Sample(8) {
		if b, err := o.Bytes(); err == nil {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		out = append(out, coolPodJSON(m.json, "ns0/p00", 1, "node-0"))
	}
	return out
}

// read checks o against the model's JSON for its key: equal, or an error
// for a key the model knows damaged (in the store; an older view may
// still hold the object before it was damaged).
func (m *coolModel) read(what string, o *object.Object, want modelObj, storeOnly bool) {
	m.t.Helper()
	got, err := o.Bytes()
	if o.Cold() {
		m.coldReads++
	}
	if m.damaged[o.Key] || !storeOnly && m.wasDamaged[o.Key+"@"+o.ResourceVersion] {
		switch {
		case err != nil && !errors.Is(err, object.ErrDamaged):
			m.t.Fatalf("%s %s: %v, want ErrDamaged", what, o.Key, err)
		case err != nil:
			return
		case storeOnly:
			m.t.Fatalf("%s %s: damaged object read without an error", what, o.Key)
		}
	}
	if err != nil {
		m.t.Fatalf("%s %s: %v", what, o.Key, err)
	}
	if !bytes.Equal(got, want.json) || o.RV != want.rv {
		m.t.Fatalf("%s %s: JSON or resourceVersion differ from the model's (rv %d, want %d)", what, o.Key, o.RV, want.rv)
	}
}

// readAll checks a list of objects against state.
func (m *coolModel) readAll(what string, objs []*object.Object, state map[string]modelObj, storeOnly bool) {
	m.t.Helper()
	var got, want []string
	for _, o := range objs {
		got = append(got, o.Key)
		m.read(what, o, state[o.Key], storeOnly)
	}
	for k := range state {
		want = append(want, k)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		m.t.Fatalf("%s keys (-want +got):\n%s", what, diff)
	}
}

// check reads the cache every way it can be read, and its figures.
func (m *coolModel) check() {
	m.t.Helper()
	for k, want := range m.objs {
		o, ok := m.ix.Get(k)
		if !ok {
			m.t.Fatalf("Get %s: missing", k)
		}
		m.read("Get", o, want, true)
	}
	if _, ok := m.ix.Get("ns9/none"); ok {
		m.t.Fatal("Get of a key never added found it")
	}
	m.readAll("List", m.ix.List(nil).Objects, m.objs, true)
	node := fmt.Sprintf("node-%d", m.pick.IntN(4))
	byNode := map[string]modelObj{}
	for k, o := range m.objs {
		if o.node == node {
			byNode[k] = o
		}
	}
	s, err := m.ix.ByIndex("node", []string{node}, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	m.readAll("ByIndex", s.Objects, byNode, true)

	// The state at each resourceVersion still in the history window, and
	// the events after it replayed onto it.
	floor := m.ix.Stats().HistoryFloor
	var rvs []string
	for rv := range m.snaps {
		if n, _ := strconv.ParseUint(rv, 10, 64); n < floor {
			delete(m.snaps, rv)
		} else {
			rvs = append(rvs, rv)
		}
	}
	slices.Sort(rvs)
	for range 2 {
		rv := rvs[m.pick.IntN(len(rvs))]
		state := m.snaps[rv]
		v, err := m.ix.ListAt(rv, nil)
		if err != nil {
			m.t.Fatalf("ListAt %s (floor %d): %v", rv, floor, err)
		}
		m.readAll("ListAt "+rv, v.Objects, state, false)
		var replay []Event
		if err := m.ix.Join(Start{ResourceVersion: rv}, func(j Joined) { replay = j.Replay }); err != nil {
			m.t.Fatalf("Join at %s: %v", rv, err)
		}
		m.fold("Join replay from "+rv, state, replay)
		var from uint64
		if err := m.ix.Join(Start{ResourceVersion: rv, NoReplay: true}, func(j Joined) { from = j.From.Seq }); err != nil {
			m.t.Fatal(err)
		}
		var evs []Event
		for caught := false; !caught; {
			if err := m.ix.ReplayAfter(from, 1+m.pick.IntN(4), func(chunk []Event, caughtUp bool, at Position) {
				evs, caught, from = append(evs, chunk...), caughtUp, at.Seq
			}); err != nil {
				m.t.Fatalf("ReplayAfter: %v", err)
			}
		}
		m.fold("ReplayAfter from "+rv, state, evs)
	}
	m.checkStats()
}

// fold applies evs, replayed from history, to state: the result is the
// model's current state.
func (m *coolModel) fold(what string, state map[string]modelObj, evs []Event) {
	m.t.Helper()
	s := maps(state)
	for _, ev := range evs {
		m.checkEventObject(what, ev, nil)
		switch ev.Type {
		case watch.Added, watch.Modified:
			b, err := ev.Object.Bytes()
			if err != nil {
				m.t.Fatalf("%s: %v", what, err)
			}
			s[ev.Object.Key] = modelObj{rv: ev.Object.RV, node: ev.Object.Values[1][0], json: b}
		case watch.Deleted:
			delete(s, ev.Object.Key)
		}
	}
	if !sameState(m.objs, s) {
		m.t.Fatalf("%s does not reach the current state (-want +got):\n%s", what, cmp.Diff(summary(m.objs), summary(s)))
	}
}

func sameState(a, b map[string]modelObj) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.rv != y.rv || x.node != y.node || !bytes.Equal(x.json, y.json) {
			return false
		}
	}
	return true
}

// summary is a state as key → "resourceVersion node JSON-length".
func summary(s map[string]modelObj) map[string]string {
	out := map[string]string{}
	for k, o := range s {
		out[k] = fmt.Sprint(o.rv, " ", o.node, " ", len(o.json))
	}
	return out
}

// checkStats recomputes the cache's figures over its objects.
func (m *coolModel) checkStats() {
	m.t.Helper()
	var want Stats
	for _, o := range m.ix.List(nil).Objects {
		want.Objects++
		want.Bytes += int64(o.Size())
		want.RawBytes += int64(o.Len())
		want.StoredBytes += int64(o.StoredLen())
		if o.Cold() {
			want.Cold++
		}
	}
	st := m.ix.Stats()
	got := Stats{Objects: st.Objects, Bytes: st.Bytes, RawBytes: st.RawBytes, StoredBytes: st.StoredBytes, Cold: st.Cold}
	if got != want {
		m.t.Fatalf("Stats = %+v, recomputed %+v", got, want)
	}
}

// finish expires the history and cools the whole cache: what it holds is
// then compressed, and still reads as the model.
func (m *coolModel) finish() {
	m.t.Helper()
	before := m.snapBefore()
	m.clock.Step(coolHistoryAge + time.Second)
	m.rv++
	m.apply(before, func() error { return m.fifo.Bookmark(strconv.FormatUint(m.rv, 10)) })
	// Steps until a whole pass, from the first key, finds nothing to do.
	started, done := false, 0
	for range 10 * coolKeys {
		st := m.ix.Cool(m.codec, 4)
		done += st.Cooled + st.Recompressed
		if st.Wrapped {
			if started && done == 0 {
				break
			}
			started, done = true, 0
		}
	}
	m.check()
	st := m.ix.Stats()
	if len(m.objs) > 0 && (st.Cold != len(m.objs) || st.StoredBytes >= st.RawBytes) {
		m.t.Fatalf("after a full cooling pass: %d of %d objects cold, %d bytes stored for %d", st.Cold, len(m.objs), st.StoredBytes, st.RawBytes)
	}
}

// TestCoolModel runs the model over many seeded sequences of changes,
// relists, reads, history expiry, cooling steps and retrainings.
func TestCoolModel(t *testing.T) {
	var cooled, recompressed, stale, repaired, coldReads int
	for seed := range uint64(64) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			m := newCoolModel(t, &rngChooser{Rand: rand.New(rand.NewPCG(seed, 38)), left: 200})
			for !m.pick.done() {
				m.step()
			}
			m.finish()
			cooled, recompressed, stale, repaired, coldReads = cooled+m.cooled, recompressed+m.recompressed, stale+m.stale, repaired+m.repaired, coldReads+m.coldReads
		})
	}
	t.Logf("cooled %d, stale %d, recompressed %d, repaired %d, cold reads %d", cooled, stale, recompressed, repaired, coldReads)
	if cooled == 0 || recompressed == 0 || repaired == 0 || coldReads == 0 {
		t.Errorf("the model never cooled (%d), recompressed (%d), repaired (%d) or read cold (%d)", cooled, recompressed, repaired, coldReads)
	}
}

// FuzzCoolModel drives the model from fuzz bytes.
func FuzzCoolModel(f *testing.F) {
	f.Add([]byte{5, 0, 6, 7, 8, 1, 9, 6, 7, 8, 10, 0, 4, 0})
	f.Add([]byte{19, 1, 2, 3, 5, 0, 7, 3, 10, 1, 4, 2, 9, 0, 8, 1, 6, 2, 3, 1, 4, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newCoolModel(t, &byteChooser{b: b})
		for !m.pick.done() {
			m.step()
		}
		m.finish()
	})
}

// TestRepairTellsNoOne: a relist that brings a damaged object back at the
// same resourceVersion replaces it without an event, and one that brings
// it changed is a Modified like any other.
func TestRepairTellsNoOne(t *testing.T) {
	m := newCoolModel(t, &rngChooser{Rand: rand.New(rand.NewPCG(1, 1)), left: 0})
	k := "ns0/p99"
	m.objs[k] = m.newObj(k)
	before := m.snapBefore()
	o := coolObj(k, m.objs[k])
	m.apply(before, func() error { return m.fifo.Add(o) })
	m.finish()
	cold, _ := m.ix.Get(k)
	if !cold.Cold() {
		t.Fatal("not cooled")
	}
	d := damaging{codec: m.codec, key: k}
	for range 2 {
		m.ix.Cool(d, coolKeys)
	}
	bad, _ := m.ix.Get(k)
	if _, err := bad.Bytes(); !errors.Is(err, object.ErrDamaged) {
		t.Fatalf("read of the damaged object: %v", err)
	}
	m.damaged[k] = true
	// Only the damaged object differs from the cache: the repair is the
	// relist's only change, and no event says it.
	m.relistWith(m.listOf(m.objs))
	got, _ := m.ix.Get(k)
	if got == bad || m.ix.Damaged(bad) {
		t.Fatal("the relist did not replace the damaged object")
	}
	m.check()
}
