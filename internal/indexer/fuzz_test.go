package indexer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// rvModel is what a cache built by rvFixture must answer: its state after
// every event, its events and its history floor, kept without the indexer.
type rvModel struct {
	syncRV, cur uint64
	floor       uint64
	// states[i] is the state (key -> RV of the object) after events[i];
	// initial is the state at syncRV.
	initial map[string]uint64
	events  []modelEvent
	states  []map[string]uint64
}

type modelEvent struct {
	typ watch.EventType
	key string
	rv  uint64
}

// stateAt is the state once every event up to n is applied.
func (m *rvModel) stateAt(n uint64) map[string]uint64 {
	s := m.initial
	for i, ev := range m.events {
		if ev.rv <= n {
			s = m.states[i]
		}
	}
	return s
}

// rvFixture builds a synced indexer from ops: each byte adds, updates or
// deletes one of four keys, or is a bookmark, and moves the RV on by 1 to 3,
// so some RVs are no event's. The history keeps maxEvents events.
func rvFixture(ops []byte, maxEvents int) (*Indexer, *rvModel) {
	ix := New([]string{"namespace"}, Options{HistoryMaxEvents: maxEvents})
	keys := []string{"a/x", "a/y", "b/x", "z"}
	obj := func(key string, rv uint64) *object.Object {
		ns, name := object.SplitKey(key)
		return &object.Object{Key: key, Namespace: ns, Name: name, ResourceVersion: strconv.FormatUint(rv, 10), RV: rv, Values: [][]string{{ns}}}
	}
	m := &rvModel{syncRV: 10, cur: 10, floor: 10, initial: map[string]uint64{"a/x": 5, "z": 7}}
	ix.Apply([]deltafifo.Delta{
		{Type: watch.Added, Object: obj("a/x", 5), ResourceVersion: "5", Relist: true},
		{Type: watch.Added, Object: obj("z", 7), ResourceVersion: "7", Relist: true},
		{Type: watch.Bookmark, ResourceVersion: "10", Synced: true},
	})
	state := m.initial
	for _, b := range ops[:min(len(ops), 24)] {
		rv := m.cur + 1 + uint64(b>>6)%3
		key := keys[(b>>2)%4]
		next := make(map[string]uint64, len(state)+1)
		for k, v := range state {
			next[k] = v
		}
		_, had := state[key]
		d := deltafifo.Delta{ResourceVersion: strconv.FormatUint(rv, 10), Object: obj(key, rv)}
		ev := modelEvent{key: key, rv: rv}
		switch b % 4 {
		case 0, 1:
			d.Type = []watch.EventType{watch.Added, watch.Modified}[b%2]
			next[key] = rv
			ev.typ = watch.Added
			if had {
				ev.typ = watch.Modified
			}
		case 2:
			d.Type = watch.Deleted
			delete(next, key)
			ev.typ = watch.Deleted
			if !had {
				ev.typ = "" // a delete of something never seen: no event
			}
		case 3:
			d = deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: d.ResourceVersion}
			ev.typ = ""
		}
		ix.Apply([]deltafifo.Delta{d})
		m.cur = rv
		if ev.typ != "" {
			m.events = append(m.events, ev)
			m.states = append(m.states, next)
			state = next
		}
	}
	// Every event has an RV of its own, so the ring drops them one by one.
	if drop := len(m.events) - maxEvents; drop > 0 {
		m.floor = m.events[drop-1].rv
	}
	return ix, m
}

func snapshotState(s Snapshot) map[string]uint64 {
	out := map[string]uint64{}
	for _, o := range s.Objects {
		out[o.Key] = o.RV
	}
	return out
}

func eventList(evs []Event) []modelEvent {
	var out []modelEvent
	for _, ev := range evs {
		out = append(out, modelEvent{typ: ev.Type, key: ev.Object.Key, rv: ev.RV})
	}
	return out
}

func (m *rvModel) eventsAfter(n uint64) []modelEvent {
	var out []modelEvent
	for _, ev := range m.events {
		if ev.rv > n {
			out = append(out, ev)
		}
	}
	return out
}

// FuzzResourceVersion feeds resourceVersions, as clients send them in List
// (min_resource_version, continue tokens) and Watch, to every method that
// parses one, over a cache with a fuzzed history: a resourceVersion that is
// not a decimal uint64 is ErrBadResourceVersion (naming it), parsing agrees
// with object.ParseRV, and a valid one is answered as a model of the cache
// says: ErrTooOld before the history floor, ErrAhead past the cache's RV,
// otherwise the events after it (Join, ReplayAfter) and the state at
// it (ListAt).
func FuzzResourceVersion(f *testing.F) {
	for _, s := range []string{"", "0", "1", "9", "10", "11", "12", "13", "15", "20", "42", "99", "007", "+5", "-1", " 12", "12 ",
		"1e3", "0x10", "18446744073709551615", "18446744073709551616", "99999999999999999999", "١٢", "abc"} {
		f.Add(s, []byte{0x00, 0x45, 0x8a, 0x06, 0xc3, 0x01}, uint8(3))
	}
	f.Add("12", []byte{}, uint8(0))
	f.Add("11", []byte{0x02, 0x03, 0x00, 0x0e}, uint8(1))
	f.Add("14", []byte{0x04, 0x04, 0x04, 0x04, 0x06, 0x4a}, uint8(7))
	f.Fuzz(func(t *testing.T, rv string, ops []byte, maxEvents uint8) {
		ix, m := rvFixture(ops, 1+int(maxEvents%8))
		n, ok := object.ParseRV(rv)
		if pn, err := parseRV(rv); (err == nil) != ok || pn != n {
			t.Fatalf("parseRV(%q) = %d, %v; object.ParseRV = %d, %v: the cache and the requests read RVs differently", rv, pn, err, n, ok)
		}
		bad := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrBadResourceVersion) || !strings.Contains(err.Error(), strconv.Quote(rv)) {
				t.Fatalf("%s(%q) error = %v, want ErrBadResourceVersion naming it", what, rv, err)
			}
		}
		if !ok {
			_, err := ix.ListAt(rv, nil)
			bad("ListAt", err)
			bad("WaitFor", ix.WaitFor(context.Background(), rv))
			if rv != "" { // "" means "from now"
				bad("Join", ix.Join(Start{ResourceVersion: rv}, func(Joined) { t.Fatal("Join called fn") }))
			}
			return
		}
		cur := strconv.FormatUint(m.cur, 10)
		tooOld := n < m.floor

		snap, err := ix.ListAt(rv, nil)
		switch {
		case n >= m.cur:
			if err != nil || snap.ResourceVersion != cur {
				t.Fatalf("ListAt(%s) at %s = RV %q, %v; want the current state", rv, cur, snap.ResourceVersion, err)
			}
			if diff := cmp.Diff(m.stateAt(m.cur), snapshotState(snap)); diff != "" {
				t.Fatalf("ListAt(%s) at %s (-want +got):\n%s", rv, cur, diff)
			}
		case tooOld:
			if !errors.Is(err, ErrTooOld) {
				t.Fatalf("ListAt(%s) with floor %d = %v, want ErrTooOld", rv, m.floor, err)
			}
		case err != nil:
			t.Fatalf("ListAt(%s) = %v", rv, err)
		default:
			if diff := cmp.Diff(m.stateAt(n), snapshotState(snap)); diff != "" {
				t.Fatalf("ListAt(%s) (-want +got):\n%s", rv, diff)
			}
			if snap.ResourceVersion != rv {
				t.Fatalf("ListAt(%s).ResourceVersion = %q", rv, snap.ResourceVersion)
			}
		}
		if !slices.IsSortedFunc(snap.Objects, func(a, b *object.Object) int { return strings.Compare(a.Key, b.Key) }) {
			t.Fatalf("ListAt(%s) is not sorted by key", rv)
		}

		var replay []Event
		join := ix.Join(Start{ResourceVersion: rv}, func(j Joined) {
			replay = j.Replay
			if j.At.ResourceVersion != cur {
				t.Errorf("Join(%s) at %q, want %s", rv, j.At.ResourceVersion, cur)
			}
		})
		if join == nil {
			// The same events, read in chunks from the position a
			// NoReplay join gives.
			var from Position
			if err := ix.Join(Start{ResourceVersion: rv, NoReplay: true}, func(j Joined) { from = j.From }); err != nil {
				t.Fatalf("Join(%s, NoReplay) = %v, but without NoReplay it joined", rv, err)
			}
			var chunked []Event
			for caught := false; !caught; {
				if err := ix.ReplayAfter(from.Seq, 2, func(evs []Event, caughtUp bool, at Position) {
					chunked, caught, from = append(chunked, evs...), caughtUp, at
				}); err != nil {
					t.Fatalf("ReplayAfter(%d) = %v", from.Seq, err)
				}
			}
			if diff := cmp.Diff(eventList(replay), eventList(chunked), cmp.AllowUnexported(modelEvent{})); diff != "" {
				t.Fatalf("events after %s in chunks (-joined +chunked):\n%s", rv, diff)
			}
			if from.ResourceVersion != cur {
				t.Fatalf("chunks after %s end at %s, want %s", rv, from.ResourceVersion, cur)
			}
		}
		for _, c := range []struct {
			what   string
			err    error
			replay []Event
		}{{"Join", join, replay}} {
			switch {
			case n > m.cur:
				if !errors.Is(c.err, ErrAhead) {
					t.Fatalf("%s(%s) at %s = %v, want ErrAhead", c.what, rv, cur, c.err)
				}
			case tooOld:
				if !errors.Is(c.err, ErrTooOld) {
					t.Fatalf("%s(%s) with floor %d = %v, want ErrTooOld", c.what, rv, m.floor, c.err)
				}
			case c.err != nil:
				t.Fatalf("%s(%s) = %v", c.what, rv, c.err)
			default:
				if diff := cmp.Diff(m.eventsAfter(n), eventList(c.replay), cmp.AllowUnexported(modelEvent{})); diff != "" {
					t.Fatalf("%s(%s) replay (-want +got):\n%s", c.what, rv, diff)
				}
			}
		}

		ctx, stop := context.WithCancel(context.Background())
		stop()
		err = ix.WaitFor(ctx, rv)
		if n <= m.cur && err != nil {
			t.Fatalf("WaitFor(%s) at %s = %v, want at once", rv, cur, err)
		}
		if n > m.cur && !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitFor(%s) at %s with a cancelled context = %v, want context.Canceled", rv, cur, err)
		}
	})
}
