package fanout

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// TestConcurrentJoins checks the join contract while events are dispatched
// outside the cache's lock: watchers join (from now, from a resourceVersion,
// with initial events) and read while a writer applies changes, relist
// groups and bookmarks, with queues small enough to overflow and replay.
// Each stream must be exactly the selection's view of the events after its
// join, in order, each once, never going back; initial events must be the
// state at the join.
func TestConcurrentJoins(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { concurrentJoins(t, seed) })
	}
}

type joined struct {
	w    *Watcher
	opts WatchOptions
	pos  uint64 // the Seq it joined at
	at   string // and the resourceVersion
	got  []Item
}

func concurrentJoins(t *testing.T, seed uint64) {
	const changes, watchers = 3000, 40
	rnd := rand.New(rand.NewPCG(seed, 7))
	ix := indexer.New([]string{"namespace", "node"}, indexer.Options{HistoryMaxEvents: 2 * changes})
	ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "100", Synced: true}})
	log := &eventLog{}
	defer ix.AddListener(log)()
	hub := New(ix, Options{QueueLength: 1 + rnd.IntN(8)})
	defer hub.Close(nil)

	// The writer owns its own random source: the test's is the joiner's.
	var wg sync.WaitGroup
	wg.Go(func() {
		rnd := rand.New(rand.NewPCG(seed, 8))
		state := map[string]*object.Object{}
		rv := 100
		for range changes {
			rv++
			name := "p" + strconv.Itoa(rnd.IntN(20))
			o := pod(name, rv, "n"+strconv.Itoa(rnd.IntN(3)))
			switch p := rnd.IntN(20); {
			case p == 0:
				ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: strconv.Itoa(rv)}})
			case p == 1 && len(state) > 1:
				var ds []deltafifo.Delta
				for k, o := range state {
					ds = append(ds, deltafifo.Delta{Type: watch.Deleted, Object: o, ResourceVersion: strconv.Itoa(rv), Relist: true})
					delete(state, k)
					if len(ds) == 3 {
						break
					}
				}
				ix.Apply(ds)
			case state[o.Key] != nil && p < 6:
				delete(state, o.Key)
				ix.Apply([]deltafifo.Delta{{Type: watch.Deleted, Object: o, ResourceVersion: o.ResourceVersion}})
			default:
				typ := watch.Added
				if state[o.Key] != nil {
					typ = watch.Modified
				}
				state[o.Key] = o
				ix.Apply([]deltafifo.Delta{{Type: typ, Object: o, ResourceVersion: o.ResourceVersion}})
			}
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers sync.WaitGroup
	js := make([]*joined, 0, watchers)
	for range watchers {
		opts := WatchOptions{Selection: modelSelections[rnd.IntN(len(modelSelections))], AllowBookmarks: rnd.IntN(2) == 0}
		switch rnd.IntN(3) {
		case 0:
			opts.SendInitialEvents = true
		case 1:
			cur, _ := strconv.Atoi(ix.Stats().ResourceVersion)
			opts.ResourceVersion = strconv.Itoa(max(100, cur-rnd.IntN(50)))
		}
		w, initial, at, err := hub.Watch(opts)
		if err != nil {
			t.Fatal(err)
		}
		// Read after Watch, pos may have moved on already; joined has not.
		j := &joined{w: w, opts: opts, got: initial, at: at, pos: w.joined}
		js = append(js, j)
		readers.Go(func() {
			for {
				items, err := w.Next(ctx)
				if err != nil {
					return
				}
				j.got = append(j.got, items...)
			}
		})
	}
	wg.Wait()
	// A bookmark reaches every watcher. Once each has caught up with it and
	// its reader has taken everything, the readers stop.
	ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: "1000000"}})
	last := log.lastSeq
	for _, j := range js {
		for !caughtUp(j.w, last) {
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	readers.Wait()

	for i, j := range js {
		var prev uint64
		for _, it := range j.got {
			n, _ := strconv.ParseUint(it.ResourceVersion, 10, 64)
			if n < prev {
				t.Fatalf("watcher %d (%+v) went back from %d to %d", i, j.opts, prev, n)
			}
			prev = n
		}
		var want []string
		if j.opts.SendInitialEvents {
			want = render(stateAt(log.events, j.pos, j.at, j.opts.Selection))
		}
		for _, ev := range log.events {
			if ev.Seq <= j.pos {
				continue
			}
			if it, ok := modelTranslate(j.opts.Selection, ev); ok {
				want = append(want, render([]Item{it})...)
			}
		}
		if diff := cmp.Diff(want, render(withoutBookmarks(j.got)), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("watcher %d (%+v, joined at seq %d): (-want +got):\n%s", i, j.opts, j.pos, diff)
		}
	}
}

// caughtUp reports whether w has everything up to seq and nothing pending.
func caughtUp(w *Watcher, seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil || (!w.lagging && w.q.len() == 0 && w.pos >= seq)
}

// stateAt is the selected objects after the logged events up to seq, as
// the initial ADDED items of a join at rv.
func stateAt(evs []indexer.Event, seq uint64, rv string, sel Selection) []Item {
	state := map[string]*object.Object{}
	for _, ev := range evs {
		if ev.Seq > seq {
			break
		}
		if ev.Type == watch.Deleted {
			delete(state, ev.Object.Key)
		} else {
			state[ev.Object.Key] = ev.Object
		}
	}
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Item
	for _, k := range keys {
		if sel.Matches(state[k]) {
			out = append(out, Item{Type: watch.Added, Object: state[k], ResourceVersion: rv})
		}
	}
	return out
}
