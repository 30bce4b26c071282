package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	testID       = Identity{Server: "https://10.0.0.1:6443", CA: "aaaa", Cluster: "0a1b-kube-system-uid"}
	testResolved = Resolved{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}
	quiet        = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// cache is a resource's encoder and indexer, as a pipeline has them.
type cache struct {
	enc *object.Encoder
	ix  *indexer.Indexer
}

func newCache(t testing.TB, historyMax int) *cache {
	t.Helper()
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "app", Label: "app"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	return &cache{enc: enc, ix: indexer.New(enc.IndexNames(), indexer.Options{HistoryMaxEvents: historyMax})}
}

func (c *cache) decode(b []byte) (*object.Object, error) {
	r, err := object.ParseRaw(b)
	if err != nil {
		return nil, err
	}
	return c.enc.Encode(r)
}

func (c *cache) obj(t testing.TB, name string, rv int, app string) *object.Object {
	t.Helper()
	o, err := c.decode(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"ns","uid":"u-%s","resourceVersion":"%d","labels":{"app":%q}},"spec":{"x":%d}}`,
		name, name, rv, app, rv))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func openDir(t testing.TB, dir string, id Identity) *Dir {
	t.Helper()
	d, err := Open(Options{Dir: dir, FlushInterval: time.Hour, FlushEvents: 1 << 30, Identity: id, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// view is what a cache serves, compared between the cache that wrote a
// state and the one restored from it.
type view struct {
	RV       string
	Objects  []string // key@rv app
	Floor    uint64
	FloorSeq uint64
	Seq      uint64
	History  []string // seq type key@rv prev@rv cacheRV
}

func viewOf(t testing.TB, ix *indexer.Indexer) view {
	t.Helper()
	cp, err := ix.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	v := view{RV: cp.At.ResourceVersion, Floor: cp.Floor, FloorSeq: cp.FloorSeq, Seq: cp.At.Seq}
	for _, o := range ix.List(nil).Objects {
		v.Objects = append(v.Objects, fmt.Sprintf("%s@%s %v %s", o.Key, o.ResourceVersion, o.Values, jsonOf(o)))
	}
	for _, ev := range cp.Events {
		prev := "-"
		if ev.Prev != nil {
			prev = ev.Prev.Key + "@" + ev.Prev.ResourceVersion
		}
		v.History = append(v.History, fmt.Sprintf("%d %s %s@%s %s %s relist=%v", ev.Seq, ev.Type, ev.Object.Key, ev.Object.ResourceVersion, prev, ev.ResourceVersion, ev.Relist))
	}
	return v
}

// restore loads the state of dir into a new cache.
func restore(t testing.TB, dir string, historyMax int) (*cache, *Loaded, error) {
	t.Helper()
	d := openDir(t, dir, testID)
	defer d.Close()
	r := d.Resource("pods", Source{StripManagedFields: true})
	c := newCache(t, historyMax)
	l, err := r.Load(c.decode, time.Now())
	r.close()
	if err != nil || l == nil {
		return c, l, err
	}
	if err := c.ix.Restore(l.Cache); err != nil {
		t.Fatalf("restore a state Load accepted: %v", err)
	}
	return c, l, nil
}

// churn applies random creates, updates, deletes, bookmarks and relist
// batches (several deltas sharing resourceVersions) to c.
type churn struct {
	rng  *rand.Rand
	c    *cache
	rv   int
	live map[string]*object.Object
}

func (ch *churn) step(t testing.TB) {
	var ds []deltafifo.Delta
	n := 1
	if ch.rng.IntN(5) == 0 {
		n = 1 + ch.rng.IntN(6) // a batch, as a relist's diff is
	}
	for range n {
		name := fmt.Sprintf("p%d", ch.rng.IntN(12))
		ch.rv++
		switch old, ok := ch.live[name]; {
		case ch.rng.IntN(8) == 0:
			ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: fmt.Sprint(ch.rv)})
		case !ok:
			o := ch.c.obj(t, name, ch.rv, fmt.Sprint("a", ch.rng.IntN(3)))
			ch.live[name] = o
			ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: n > 1})
		case ch.rng.IntN(3) == 0:
			delete(ch.live, name)
			ds = append(ds, deltafifo.Delta{Type: watch.Deleted, Object: old, ResourceVersion: fmt.Sprint(ch.rv), Relist: n > 1})
		default:
			o := ch.c.obj(t, name, ch.rv, fmt.Sprint("a", ch.rng.IntN(3)))
			ch.live[name] = o
			ds = append(ds, deltafifo.Delta{Type: watch.Modified, Object: o, ResourceVersion: o.ResourceVersion, Relist: n > 1})
		}
	}
	ch.c.ix.Apply(ds)
}

func (ch *churn) sync(t testing.TB) {
	var ds []deltafifo.Delta
	for i := range 5 {
		ch.rv++
		o := ch.c.obj(t, fmt.Sprintf("p%d", i), ch.rv, "a0")
		ch.live[o.Name] = o
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: fmt.Sprint(ch.rv), Synced: true})
	ch.c.ix.Apply(ds)
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCrashAfterAnyWrite is a model test: a cache under random churn,
// with a history window smaller than the churn (so events leave it and are
// folded into the state's base, and the writer sometimes falls behind it
// and writes the whole cache again), is written at random points. The file
// as each write left it is what a SIGKILL right after it leaves; restored,
// it must serve exactly what the cache served at that write: the objects,
// the resourceVersion and the history a watch resumes from, each event
// with its state before.
func TestCrashAfterAnyWrite(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			historyMax := 1 + rng.IntN(25)
			c := newCache(t, historyMax)
			dir := t.TempDir()
			d := openDir(t, dir, testID)
			r := d.Resource("pods", Source{StripManagedFields: true})
			r.resolved = testResolved
			defer r.close()
			ch := &churn{rng: rng, c: c, live: map[string]*object.Object{}}
			ch.sync(t)
			type written struct {
				dir  string
				want view
			}
			var writes []written
			for i := range 120 {
				ch.step(t)
				if rng.IntN(4) != 0 {
					continue
				}
				if err := r.flush(c.ix); err != nil {
					t.Fatal(err)
				}
				w := written{dir: filepath.Join(t.TempDir(), fmt.Sprint(i)), want: viewOf(t, c.ix)}
				copyFile(t, r.path, filepath.Join(w.dir, "pods.db"))
				writes = append(writes, w)
			}
			if len(writes) == 0 {
				t.Skip("no write")
			}
			for _, w := range writes {
				got, l, err := restore(t, w.dir, historyMax)
				if err != nil || l == nil {
					t.Fatalf("load %s: %v", w.dir, err)
				}
				if diff := cmp.Diff(w.want, viewOf(t, got.ix)); diff != "" {
					t.Fatalf("restored cache differs from the one written (-written +restored):\n%s", diff)
				}
			}
			st := r.Stats()
			if st.FullWrites == 0 || st.Writes == 0 {
				t.Errorf("stats %+v: want writes and at least the first full one", st)
			}
		})
	}
}

// TestResumeAfterRestore checks what a client sees: every resourceVersion
// the restored history covers resumes with exactly the events after it.
func TestResumeAfterRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCache(t, 50)
	dir := t.TempDir()
	d := openDir(t, dir, testID)
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	ch := &churn{rng: rng, c: c, live: map[string]*object.Object{}}
	ch.sync(t)
	for range 30 {
		ch.step(t)
	}
	if err := r.flush(c.ix); err != nil {
		t.Fatal(err)
	}
	r.close()
	d.Close()
	got, _, err := restore(t, dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	floor := c.ix.Stats().HistoryFloor
	for rv := floor; rv <= uint64(ch.rv); rv++ {
		want, werr := replay(c.ix, rv)
		have, herr := replay(got.ix, rv)
		if (werr == nil) != (herr == nil) || !slices.Equal(want, have) {
			t.Fatalf("resume from %d: written cache %v (%v), restored %v (%v)", rv, want, werr, have, herr)
		}
	}
	if _, err := replay(got.ix, floor-1); !errors.Is(err, indexer.ErrTooOld) {
		t.Errorf("resume from before the restored window: %v, want ErrTooOld", err)
	}
}

func replay(ix *indexer.Indexer, rv uint64) ([]string, error) {
	var out []string
	err := ix.Join(indexer.Start{ResourceVersion: fmt.Sprint(rv)}, func(j indexer.Joined) {
		for _, ev := range j.Replay {
			out = append(out, fmt.Sprintf("%s %s@%s", ev.Type, ev.Object.Key, ev.ResourceVersion))
		}
	})
	return out, err
}

// written returns a state directory holding one written state, and the
// view it holds.
func writtenState(t *testing.T) (string, view) {
	t.Helper()
	c := newCache(t, 20)
	dir := t.TempDir()
	d := openDir(t, dir, testID)
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	ch := &churn{rng: rand.New(rand.NewPCG(3, 4)), c: c, live: map[string]*object.Object{}}
	ch.sync(t)
	for range 40 {
		ch.step(t)
	}
	if err := r.flush(c.ix); err != nil {
		t.Fatal(err)
	}
	r.close()
	d.Close()
	return dir, viewOf(t, c.ix)
}

// TestUnknownClusterUIDIsNotCompared: a restart that could not ask the API
// server for the kube-system namespace's uid still serves a state written
// for the same URL and CA; one that knows it refuses another cluster's
// (TestBadStateIsSetAside).
func TestUnknownClusterUIDIsNotCompared(t *testing.T) {
	dir, want := writtenState(t)
	d := openDir(t, dir, Identity{Server: testID.Server, CA: testID.CA})
	defer d.Close()
	r := d.Resource("pods", Source{StripManagedFields: true})
	defer r.close()
	c := newCache(t, 20)
	l, err := r.Load(c.decode, time.Now())
	if err != nil || l == nil {
		t.Fatalf("Load = %v, %v; want the state", l, err)
	}
	if err := c.ix.Restore(l.Cache); err != nil {
		t.Fatal(err)
	}
	if got := viewOf(t, c.ix); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

// TestBadStateIsSetAside: a damaged, truncated or foreign state is never
// served: Load refuses it with the reason, moves it aside and the cache
// starts cold.
func TestBadStateIsSetAside(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
		id     Identity
		src    Source
		reason string
	}{
		{name: "a flipped bit in an object", damage: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			i := bytes.Index(b, []byte(`"spec":{"x":`))
			if i < 0 {
				t.Fatal("no object in the file")
			}
			b[i+3] ^= 1
			os.WriteFile(path, b, 0o600)
		}, reason: "checksum mismatch"},
		{name: "truncated", damage: func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/2)
		}, reason: ""},
		{name: "empty file", damage: func(t *testing.T, path string) { os.Truncate(path, 0) }, reason: "open"},
		{name: "garbage", damage: func(t *testing.T, path string) {
			os.WriteFile(path, bytes.Repeat([]byte("informerd"), 4096), 0o600)
		}, reason: "open"},
		{name: "another cluster", id: Identity{Server: "https://10.0.0.2:6443", CA: "bbbb"}, reason: "another cluster"},
		{name: "another cluster behind the same URL and CA", id: Identity{Server: testID.Server, CA: testID.CA, Cluster: "9f8e-rebuilt"}, reason: "kube-system namespace uid 0a1b-kube-system-uid"},
		{name: "another configuration", src: Source{Namespace: "other", StripManagedFields: true}, reason: "another configuration"},
		{name: "another format version", damage: func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			h := header{Format: formatVersion + 1, Resource: "pods", Server: testID.Server, CA: testID.CA, Source: Source{StripManagedFields: true}, Resolved: testResolved}
			v, _ := sealJSON(h)
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyHeader, v) }); err != nil {
				t.Fatal(err)
			}
		}, reason: "format version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := writtenState(t)
			path := filepath.Join(dir, "pods.db")
			if tc.damage != nil {
				tc.damage(t, path)
			}
			id, src := testID, Source{StripManagedFields: true}
			if tc.id != (Identity{}) {
				id = tc.id
			}
			if tc.src != (Source{}) {
				src = tc.src
			}
			d := openDir(t, dir, id)
			r := d.Resource("pods", src)
			c := newCache(t, 20)
			l, err := r.Load(c.decode, time.Now())
			var aside *SetAsideError
			if l != nil || !errors.As(err, &aside) {
				t.Fatalf("Load = %v, %v; want a SetAsideError", l, err)
			}
			if !strings.Contains(aside.Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", aside.Reason, tc.reason)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused state is still at %s", path)
			}
			if _, err := os.Stat(aside.Path); err != nil {
				t.Errorf("the refused state is not at %s: %v", aside.Path, err)
			}
			if got := r.Stats().SetAside; got != aside.Reason {
				t.Errorf("Stats().SetAside = %q, want %q", got, aside.Reason)
			}
			// The next Load finds no state: a cold start.
			if l, err := r.Load(c.decode, time.Now()); l != nil || err != nil {
				t.Errorf("second Load = %v, %v; want nothing", l, err)
			}
		})
	}
}

// TestRandomDamageNeverServesGarbage flips random bytes of a written
// state: Load either refuses it or restores exactly what was written
// (bbolt then fell back to its other, older root — here the same state).
func TestRandomDamageNeverServesGarbage(t *testing.T) {
	dir, want := writtenState(t)
	orig, err := os.ReadFile(filepath.Join(dir, "pods.db"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	refused := 0
	for i := range 200 {
		b := bytes.Clone(orig)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		sub := filepath.Join(t.TempDir(), fmt.Sprint(i))
		os.MkdirAll(sub, 0o700)
		if err := os.WriteFile(filepath.Join(sub, "pods.db"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, l, err := restore(t, sub, 20)
		var aside *SetAsideError
		switch {
		case errors.As(err, &aside):
			refused++
		case err != nil || l == nil:
			t.Fatalf("damage %d: Load = %v, %v", i, l, err)
		default:
			if diff := cmp.Diff(want, viewOf(t, got.ix)); diff != "" {
				t.Fatalf("damage %d: a damaged state was served (-written +served):\n%s", i, diff)
			}
		}
	}
	t.Logf("%d of 200 damaged states refused, the rest restored unchanged (damage in free pages)", refused)
}

// TestDirIsLocked: two informerd processes never share a state directory.
func TestDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	openDir(t, dir, testID)
	_, err := Open(Options{Dir: dir, Identity: testID, Log: quiet})
	if err == nil || !strings.Contains(err.Error(), "in use by another informerd") {
		t.Fatalf("second Open: %v, want in use", err)
	}
}

// TestFullDisk: a write that fails — here every write to /dev/full, which
// answers ENOSPC — is counted and reported, never fatal, and the next
// write that succeeds clears it.
func TestFullDisk(t *testing.T) {
	c := newCache(t, 20)
	d := openDir(t, t.TempDir(), testID)
	full := true
	d.opts.openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if full {
			return os.OpenFile("/dev/full", os.O_RDWR, 0)
		}
		return os.OpenFile(name, flag, perm)
	}
	r := d.Resource("pods", Source{StripManagedFields: true})
	r.resolved = testResolved
	defer r.close()
	defer c.ix.AddListener(r)()
	ch := &churn{rng: rand.New(rand.NewPCG(8, 9)), c: c, live: map[string]*object.Object{}}
	ch.sync(t)
	ch.step(t)
	err := r.flush(c.ix)
	st := r.Stats()
	if err == nil || st.WriteErrors != 1 || !strings.Contains(st.LastError, "no space left on device") || st.LagEvents == 0 || st.Oldest.IsZero() {
		t.Fatalf("a write to a full disk: %v, stats %+v; want the error counted and kept, the change still waiting", err, st)
	}
	full = false
	if err := r.flush(c.ix); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.LastError != "" || st.Writes != 1 || st.LagEvents != 0 || st.Written != c.ix.Stats().ResourceVersion {
		t.Errorf("after space came back: stats %+v, want the error cleared and everything written", st)
	}
}

// jsonOf is o's JSON, or the error Bytes returns as text.
func jsonOf(o *object.Object) string {
	b, err := o.Bytes()
	if err != nil {
		return err.Error()
	}
	return string(b)
}
