package deltafifo

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeKnown is a map standing in for the cache.
type fakeKnown map[string]*object.Object

func (k fakeKnown) Keys() []string {
	var out []string
	for key := range k {
		out = append(out, key)
	}
	return out
}

func (k fakeKnown) Get(key string) (*object.Object, bool) { o, ok := k[key]; return o, ok }

func obj(key, uid, rv string) *object.Object {
	n, _ := object.ParseRV(rv)
	return &object.Object{Key: key, UID: uid, ResourceVersion: rv, RV: n}
}

// summary is a Delta reduced to what the tests compare.
type summary struct {
	Type   watch.EventType
	Key    string
	RV     string
	Relist bool
	Synced bool
}

func summarize(ds []Delta) []summary {
	var out []summary
	for _, d := range ds {
		s := summary{Type: d.Type, RV: d.ResourceVersion, Relist: d.Relist, Synced: d.Synced}
		if d.Object != nil {
			s.Key = d.Object.Key
		}
		out = append(out, s)
	}
	return out
}

func TestReplaceDiff(t *testing.T) {
	tests := []struct {
		name  string
		known fakeKnown
		list  []*object.Object
		rv    string
		first bool
		want  []summary
	}{
		{
			name:  "first list adds everything and marks synced",
			known: fakeKnown{},
			list:  []*object.Object{obj("ns/b", "ub", "5"), obj("ns/a", "ua", "3")},
			rv:    "9", first: true,
			want: []summary{
				{watch.Added, "ns/a", "3", true, false}, {watch.Added, "ns/b", "5", true, false},
				{watch.Bookmark, "", "9", true, true},
			},
		},
		{
			name:  "unchanged objects emit nothing",
			known: fakeKnown{"ns/a": obj("ns/a", "ua", "3"), "ns/b": obj("ns/b", "ub", "5")},
			list:  []*object.Object{obj("ns/a", "ua", "3"), obj("ns/b", "ub", "5")},
			rv:    "20",
			want:  []summary{{watch.Bookmark, "", "20", true, false}},
		},
		{
			name: "adds, updates and deletes in RV order, deletes last at the list RV",
			known: fakeKnown{
				"ns/same": obj("ns/same", "u1", "3"),
				"ns/chg":  obj("ns/chg", "u2", "4"),
				"ns/gone": obj("ns/gone", "u3", "5"),
				"ns/gon2": obj("ns/gon2", "u4", "6"),
			},
			list: []*object.Object{obj("ns/new", "u5", "12"), obj("ns/same", "u1", "3"), obj("ns/chg", "u2", "10")},
			rv:   "15",
			want: []summary{
				{watch.Modified, "ns/chg", "10", true, false}, {watch.Added, "ns/new", "12", true, false},
				{watch.Deleted, "ns/gon2", "15", true, false}, {watch.Deleted, "ns/gone", "15", true, false},
				{watch.Bookmark, "", "15", true, false},
			},
		},
		{
			name:  "recreated object (new UID) is a delete then an add",
			known: fakeKnown{"ns/a": obj("ns/a", "old", "3")},
			list:  []*object.Object{obj("ns/a", "new", "8")},
			rv:    "9",
			want:  []summary{{watch.Deleted, "ns/a", "8", true, false}, {watch.Added, "ns/a", "8", true, false}, {watch.Bookmark, "", "9", true, false}},
		},
		{
			name:  "empty list deletes everything",
			known: fakeKnown{"a": obj("a", "ua", "3")},
			list:  nil,
			rv:    "4",
			want:  []summary{{watch.Deleted, "a", "4", true, false}, {watch.Bookmark, "", "4", true, false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(tt.known, 10)
			f.synced = !tt.first
			if err := f.Replace(tt.list, tt.rv); err != nil {
				t.Fatal(err)
			}
			got, err := f.Pop(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Pop() after Replace (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOrderIsKept(t *testing.T) {
	f := New(fakeKnown{}, 10)
	a1, a2 := obj("a", "ua", "1"), obj("a", "ua", "2")
	for _, push := range []func() error{
		func() error { return f.Add(a1) },
		func() error { return f.Update(a2) },
		func() error { return f.Bookmark("3") },
		func() error { return f.Delete(obj("a", "ua", "4")) },
	} {
		if err := push(); err != nil {
			t.Fatal(err)
		}
	}
	var got []summary
	for range 4 {
		ds, err := f.Pop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summarize(ds)...)
	}
	want := []summary{{watch.Added, "a", "1", false, false}, {watch.Modified, "a", "2", false, false}, {watch.Bookmark, "", "3", false, false}, {watch.Deleted, "a", "4", false, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

func TestFullQueueBlocksProducerUntilPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(fakeKnown{}, 2)
		for i := range 2 {
			if err := f.Add(obj("k", "u", string(rune('1'+i)))); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- f.Add(obj("k", "u", "3")) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Add on a full queue returned %v, want it to wait", err)
		default:
		}
		if got := queued(f); got != 2 {
			t.Fatalf("Len() = %d, want 2 (the bound)", got)
		}
		if _, err := f.Pop(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := <-done; err != nil {
			t.Fatalf("Add after Pop: %v", err)
		}
	})
}

func TestCloseReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(fakeKnown{}, 1)
		if err := f.Add(obj("k", "u", "1")); err != nil {
			t.Fatal(err)
		}
		blocked := make(chan error, 1)
		go func() { blocked <- f.Add(obj("k", "u", "2")) }()
		synctest.Wait()
		f.Close()
		f.Close() // idempotent
		if err := <-blocked; !errors.Is(err, ErrClosed) {
			t.Errorf("blocked Add after Close = %v, want ErrClosed", err)
		}
		if _, err := f.Pop(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Pop after Close = %v, want ErrClosed", err)
		}
	})
}

func TestPopHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(fakeKnown{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := f.Pop(ctx); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Pop = %v, want context.Canceled", err)
		}
	})
}

func TestNewerReplaceSupersedesQueuedOne(t *testing.T) {
	f := New(fakeKnown{}, 10)
	f.synced = true
	steps := []func() error{
		func() error { return f.Add(obj("a", "ua", "1")) },
		func() error { return f.Replace([]*object.Object{obj("b", "ub", "2")}, "2") },
		func() error { return f.Add(obj("c", "uc", "3")) },
		func() error { return f.Replace([]*object.Object{obj("d", "ud", "4")}, "4") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if got := queued(f); got != 2 {
		t.Fatalf("Len() = %d, want 2: the add before the first list, and the newest list", got)
	}
	var got []summary
	for range 2 {
		ds, err := f.Pop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summarize(ds)...)
	}
	want := []summary{{watch.Added, "a", "1", false, false}, {watch.Added, "d", "4", true, false}, {watch.Bookmark, "", "4", true, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

// queued is the number of entries in f's queue.
func queued(f *FIFO) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.items) - f.head
}
