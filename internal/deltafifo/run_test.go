package deltafifo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// cacheModel is a cache that Run's apply writes: the objects by key and the
// resourceVersion reached. It fails the test when two applies overlap or
// the resourceVersion goes back.
type cacheModel struct {
	t       *testing.T
	mu      sync.Mutex
	objs    fakeKnown
	rv      uint64
	inApply atomic.Int32
	// direct counts deltas applied on the producer's goroutine: those
	// applied while the producer was inside its push.
	direct, pushing atomic.Int64
	delay           func() // called inside each apply; nil for none
}

func newCacheModel(t *testing.T) *cacheModel { return &cacheModel{t: t, objs: fakeKnown{}} }

func (c *cacheModel) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objs.Keys()
}

func (c *cacheModel) Get(key string) (*object.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objs.Get(key)
}

func (c *cacheModel) apply(ds []Delta) {
	if c.inApply.Add(1) != 1 {
		c.t.Error("two applies ran at once")
	}
	defer c.inApply.Add(-1)
	if c.pushing.Load() > 0 && len(ds) == 1 {
		c.direct.Add(1)
	}
	if c.delay != nil {
		c.delay()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range ds {
		rv, _ := object.ParseRV(d.ResourceVersion)
		if rv < c.rv {
			c.t.Errorf("resourceVersion went back: %d after %d (%s %+v)", rv, c.rv, d.Type, d.Object)
		}
		c.rv = rv
		switch d.Type {
		case watch.Added, watch.Modified:
			c.objs[d.Object.Key] = d.Object
		case watch.Deleted:
			delete(c.objs, d.Object.Key)
		}
	}
}

func (c *cacheModel) state() (map[string]string, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, o := range c.objs {
		out[k] = o.ResourceVersion
	}
	return out, c.rv
}

// TestRunAppliesOnTheProducerWhenIdle: with Run waiting on an empty queue,
// each change is applied before its Add returns, by the producer; a
// Replace is left to Run.
func TestRunAppliesOnTheProducerWhenIdle(t *testing.T) {
	c := newCacheModel(t)
	f := New(c, 10)
	defer runInBackground(f, c.apply)()

	if err := f.Replace([]*object.Object{obj("a", "ua", "1")}, "2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, rv := c.state(); return rv == 2 })
	waitFor(t, func() bool { // Run is done applying it
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.applying
	})
	if d := c.direct.Load(); d != 0 {
		t.Fatalf("the Replace was applied by the producer (%d direct applies)", d)
	}
	for i := 3; i < 10; i++ {
		c.pushing.Add(1)
		err := f.Update(obj("a", "ua", strconv.Itoa(i)))
		c.pushing.Add(-1)
		if err != nil {
			t.Fatal(err)
		}
		objs, rv := c.state()
		if rv != uint64(i) || objs["a"] != strconv.Itoa(i) {
			t.Fatalf("after Update at %d returned, the cache is at %d with %v: not applied by the producer", i, rv, objs)
		}
	}
	if d := c.direct.Load(); d != 7 {
		t.Fatalf("%d of 7 changes applied by the producer", d)
	}
}

// TestRunQueuesBehindAReplace: changes pushed while Run applies a Replace
// wait in the queue and are applied after it, in order; the producer is
// not held by the Replace until the queue is full.
func TestRunQueuesBehindAReplace(t *testing.T) {
	c := newCacheModel(t)
	release := make(chan struct{})
	var held atomic.Bool
	c.delay = func() {
		if held.CompareAndSwap(false, true) {
			<-release // the first apply, the Replace's
		}
	}
	f := New(c, 5)
	defer runInBackground(f, c.apply)()

	if err := f.Replace([]*object.Object{obj("a", "ua", "1")}, "1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, held.Load)
	for i := 2; i < 7; i++ { // fills the queue, without waiting
		if err := f.Add(obj("k"+strconv.Itoa(i), "u", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, rv := c.state(); rv != 0 {
		t.Fatalf("applied past a Replace still being applied: at %d", rv)
	}
	close(release)
	waitFor(t, func() bool { _, rv := c.state(); return rv == 6 })
	objs, _ := c.state()
	want := map[string]string{"a": "1", "k2": "2", "k3": "3", "k4": "4", "k5": "5", "k6": "6"}
	if d := cmp.Diff(want, objs); d != "" {
		t.Fatalf("cache (-want +got):\n%s", d)
	}
}

// TestRunRandomized pushes random changes, bookmarks and relists from a
// producer while applies take random time, and checks what Run and the
// producer's own applies do together against applying every push in
// order: never two applies at once, the resourceVersion never back (both
// checked by cacheModel), and the same final cache.
func TestRunRandomized(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomized(t, seed) })
	}
}

// FuzzRun explores TestRunRandomized's sequences beyond its seeds.
func FuzzRun(f *testing.F) {
	for _, seed := range []uint64{0, 3, 99} {
		f.Add(seed)
	}
	f.Fuzz(runRandomized)
}

func runRandomized(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	c := newCacheModel(t)
	var delayMu sync.Mutex
	delayRng := rand.New(rand.NewPCG(seed, 7))
	c.delay = func() {
		delayMu.Lock()
		d := delayRng.IntN(4)
		delayMu.Unlock()
		if d == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	f := New(c, 1+rng.IntN(8))
	stop := runInBackground(f, c.apply)

	model := map[string]string{} // key → resourceVersion, applied in push order
	rv := 0
	for range 300 {
		rv++
		key := "k" + strconv.Itoa(rng.IntN(6))
		var err error
		switch op := rng.IntN(10); {
		case op < 4:
			_, exists := model[key]
			model[key] = strconv.Itoa(rv)
			if exists {
				err = f.Update(obj(key, "u", strconv.Itoa(rv)))
			} else {
				err = f.Add(obj(key, "u", strconv.Itoa(rv)))
			}
		case op < 6:
			if _, ok := model[key]; ok {
				delete(model, key)
				err = f.Delete(obj(key, "u", strconv.Itoa(rv)))
			}
		case op < 8:
			err = f.Bookmark(strconv.Itoa(rv))
		default: // a relist: what the model holds, some of it changed or gone
			var list []*object.Object
			for _, k := range slices.Sorted(maps.Keys(model)) {
				switch rng.IntN(4) {
				case 0:
					model[k] = strconv.Itoa(rv)
				case 1:
					delete(model, k)
					continue
				}
				list = append(list, obj(k, "u", model[k]))
			}
			err = f.Replace(list, strconv.Itoa(rv))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rv++
	if err := f.Bookmark(strconv.Itoa(rv)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, at := c.state(); return at == uint64(rv) })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	got, _ := c.state()
	if d := cmp.Diff(model, got); d != "" {
		t.Fatalf("seed %d: cache (-model +got):\n%s", seed, d)
	}
}

// TestRunReturnsWhenClosed: Close ends Run with ErrClosed, and later pushes
// fail instead of being applied.
func TestRunReturnsWhenClosed(t *testing.T) {
	c := newCacheModel(t)
	f := New(c, 2)
	done := make(chan error)
	go func() { done <- f.Run(context.Background(), c.apply) }()
	f.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Run returned %v, want ErrClosed", err)
	}
	if err := f.Add(obj("a", "u", "1")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
	if objs, _ := c.state(); len(objs) != 0 {
		t.Fatalf("applied after Close: %v", objs)
	}
}

// runInBackground runs f.Run with apply on a goroutine of its own; the
// func returned stops it and returns what Run returned.
func runInBackground(f *FIFO, apply func([]Delta)) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, apply) }()
	return func() error {
		cancel()
		return <-done
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunTwoProducers: a change queued by one producer while another
// applies its own waits until that apply is done.
func TestRunTwoProducers(t *testing.T) {
	c := newCacheModel(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	c.delay = func() {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}
	f := New(c, 4)
	defer runInBackground(f, c.apply)()
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.apply != nil })

	added := make(chan error)
	go func() { added <- f.Add(obj("a", "u", "1")) }()
	<-entered // applied by its producer, which is held in its Add
	select {
	case err := <-added:
		t.Fatalf("Add returned (%v) before its change was applied", err)
	default:
	}
	if err := f.Add(obj("b", "u", "2")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // time enough for Run to apply b, wrongly
	if c.inApply.Load() != 1 {
		t.Fatalf("%d applies running, want the first alone", c.inApply.Load())
	}
	close(release)
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { objs, _ := c.state(); return len(objs) == 2 })
}
