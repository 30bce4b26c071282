package reflector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// directRun is one watch read by a streamWatch that applies events itself,
// against a stand-in for client-go's Reflector that handles what it is
// sent as handleAnyWatch does: one event at a time, its resourceVersion
// the one to watch again from, the streaming list stored (listed closed)
// when its end bookmark arrives, Stop after an ERROR.
type directRun struct {
	t      *testing.T
	rng    *rand.Rand
	rngMu  sync.Mutex
	mu     sync.Mutex
	log    []string // every event stored, by apply or by the Reflector, in order
	busy   atomic.Bool
	listed *listSignal
	// caughtUp holds the bookmarks the watch made; the Reflector does not
	// store them, only takes their resourceVersion.
	caughtUp sync.Map
	// lastRV is the Reflector's resourceVersion when the watch is over.
	lastRV string
	errors []string
}

func (d *directRun) pause() {
	d.rngMu.Lock()
	n, us := d.rng.IntN(4), 20+d.rng.IntN(100)
	d.rngMu.Unlock()
	if n == 0 {
		time.Sleep(time.Duration(us) * time.Microsecond)
	}
}

func (d *directRun) store(ev watch.Event) {
	o := ev.Object.(*object.Raw)
	d.mu.Lock()
	d.log = append(d.log, string(ev.Type)+"@"+o.ResourceVersion)
	d.mu.Unlock()
}

// apply is the streamWatch's apply hook.
func (d *directRun) apply(ev watch.Event) {
	if d.busy.Load() {
		d.t.Errorf("%s@%s applied while the Reflector stores an event", ev.Type, ev.Object.(*object.Raw).ResourceVersion)
	}
	if d.listed != nil {
		select {
		case <-d.listed.done:
		default:
			d.t.Errorf("%s applied before the streaming list was stored", ev.Type)
		}
	}
	d.store(ev)
	d.pause()
}

// reflect reads the watch as the Reflector does, until it closes or sends
// an ERROR.
func (d *directRun) reflect(w *streamWatch) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			d.errors = append(d.errors, fmt.Sprint(ev.Object.(*metav1.Status).Code))
			return
		}
		d.busy.Store(true)
		o := ev.Object.(*object.Raw)
		if _, ok := d.caughtUp.LoadAndDelete(o.ResourceVersion); !ok || ev.Type != watch.Bookmark {
			d.store(ev)
		}
		d.pause()
		d.lastRV = o.ResourceVersion
		d.busy.Store(false)
		if ev.Type == watch.Bookmark && o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" && d.listed != nil {
			d.listed.tell(true) // the end of its Replace
		}
	}
}

// TestStreamWatchAppliesInOrder is a model-based test of the watch that
// applies its events itself: for random streams (with or without a
// streaming list first, ending with EOF, an ERROR or an undecodable
// event, written with random pauses, stored with random pauses), every
// event is stored exactly once and in order, by the watch or by the
// Reflector but never both at once, nothing after a streaming list's end
// before the Reflector stored the list, and when the watch is over the
// Reflector's resourceVersion is the last event's, so the next watch
// starts right after it: no gap, no duplicate, never backwards.
func TestStreamWatchAppliesInOrder(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { directRandomized(t, seed) })
	}
}

// FuzzStreamWatchAppliesInOrder explores TestStreamWatchAppliesInOrder's
// streams beyond its seeds.
func FuzzStreamWatchAppliesInOrder(f *testing.F) {
	for _, seed := range []uint64{0, 1, 7, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(directRandomized)
}

func directRandomized(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := &directRun{t: t, rng: rand.New(rand.NewPCG(seed, 2))}
	streaming := rng.IntN(2) == 0
	if streaming {
		d.listed = newListSignal()
	}
	var lines, want []string
	rv := 100
	event := func(typ string, annotations string) {
		rv++
		lines = append(lines, fmt.Sprintf(`{"type":%q,"object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p%d","namespace":"ns","resourceVersion":"%d"%s}}}`, typ, rng.IntN(5), rv, annotations))
		want = append(want, fmt.Sprintf("%s@%d", typ, rv))
	}
	if streaming {
		for range rng.IntN(5) {
			event("ADDED", "")
		}
		event("BOOKMARK", `,"annotations":{"k8s.io/initial-events-end":"true"}`)
	}
	for range rng.IntN(30) {
		event([]string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}[rng.IntN(4)], "")
	}
	ending := rng.IntN(3) // 0 EOF, 1 ERROR, 2 undecodable
	switch ending {
	case 1: // and what follows it, never to be stored
		lines = append(lines, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"reason":"InternalError"}}`,
			fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p0","resourceVersion":"%d"}}}`, rv+1),
			fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"%d"}}}`, rv+2))
	case 2:
		lines = append(lines, `{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":7}}}`)
	}

	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	var wg sync.WaitGroup
	var g gap
	w.start(&wg, streamHooks{
		end:           g.watchEnd(streaming),
		onUndecodable: func(error) { g.record() },
		apply:         d.apply,
		listed:        d.listed,
		caughtUp: func(rv string) watch.Event {
			d.caughtUp.Store(rv, true)
			return watch.Event{Type: watch.Bookmark, Object: bookmarkAt(rv)}
		},
	})
	go func() {
		for _, l := range lines {
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
			body.line(l)
		}
		if ending == 0 {
			_ = body.w.Close()
		}
	}()
	d.reflect(w)
	wg.Wait()

	if got := strings.Join(d.log, " "); got != strings.Join(want, " ") {
		t.Fatalf("streaming=%v ending=%d: stored\n  %s\nwant\n  %s", streaming, ending, got, strings.Join(want, " "))
	}
	// After an EOF or an ERROR client-go watches again from its
	// resourceVersion; after a 410 it lists, not older than it.
	if len(want) > 0 && d.lastRV != strconv.Itoa(rv) {
		t.Errorf("the Reflector would go on from %q, want %d, the last event's", d.lastRV, rv)
	}
	switch ending {
	case 1:
		if len(d.errors) != 1 || d.errors[0] != "500" {
			t.Errorf("errors %v, want the 500", d.errors)
		}
	case 2:
		if len(d.errors) != 1 || d.errors[0] != "410" {
			t.Errorf("errors %v, want the 410 of a missed change", d.errors)
		}
	}
}

// TestStreamWatchEndsWhenTheListFails: when the Reflector fails to store
// the streaming list, the missed change ends the watch, whose goroutines
// exit although client-go neither reads it again nor stops it.
func TestStreamWatchEndsWhenTheListFails(t *testing.T) {
	body := newPipeBody()
	w := newStreamWatch(context.Background(), body, nil)
	var wg sync.WaitGroup
	var g gap
	applied := 0
	w.start(&wg, streamHooks{
		end:      g.watchEnd(true),
		apply:    func(watch.Event) { applied++ },
		listed:   newListSignal(),
		caughtUp: func(rv string) watch.Event { return watch.Event{Type: watch.Bookmark, Object: bookmarkAt(rv)} },
	})
	go func() {
		body.line(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}`)
		body.line(`{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"6","annotations":{"k8s.io/initial-events-end":"true"}}}}`)
		body.line(`{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"7"}}}`)
	}()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			break
		}
	}
	g.record() // the Replace failed
	exited := make(chan struct{})
	go func() { wg.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch's goroutines still run after its list failed")
	}
	if applied != 0 {
		t.Errorf("%d events applied after a list that was not stored", applied)
	}
}

// TestReplaceTellsTheWatchLast: the watch whose streaming list a Replace
// stores is told only once the Replace is done (the gap it fills closed,
// its resourceVersion recorded), so the changes it then applies are
// neither dropped as behind a gap nor followed by the list's bookkeeping;
// a Replace that fails tells it so.
func TestReplaceTellsTheWatchLast(t *testing.T) {
	for _, refuse := range []string{"", "replace"} {
		enc, err := object.NewEncoder(nil, true)
		if err != nil {
			t.Fatal(err)
		}
		r := New(nil, enc, &recordingQueue{refuse: refuse}, Options{Name: "configmaps"})
		r.gap.record() // a change was missed: this list fills the gap
		l := newListSignal()
		r.listed.Store(l)
		type seen struct {
			gapOpen bool
			rv      any
		}
		told := make(chan seen)
		go func() {
			<-l.done
			told <- seen{r.gap.open(), r.signals.LastResourceVersion.Load()}
		}()
		err = (*store)(r).Replace([]any{raw(t, "a", "2", "")}, "2")
		got := <-told
		if refuse == "" {
			if err != nil || !l.stored {
				t.Fatalf("Replace: %v, told stored=%v", err, l.stored)
			}
			if got.gapOpen || got.rv != "2" {
				t.Errorf("told while the gap was open (%v) or before the list's resourceVersion was recorded (%v)", got.gapOpen, got.rv)
			}
		} else if err == nil || l.stored {
			t.Errorf("a refused Replace: %v, told stored=%v", err, l.stored)
		}
	}
}
