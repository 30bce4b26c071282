package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
)

// compressPodJSON is the API server's JSON of pod i at resourceVersion rv.
func compressPodJSON(i int, rv uint64) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-%05d","namespace":"ns%d","uid":"uid-%d","resourceVersion":"%d",`+
		`"labels":{"app":"web","pod-template-hash":"7d9f8c"}},"spec":{"nodeName":"node-%d","restartPolicy":"Always",`+
		`"containers":[{"name":"web","image":"registry.example.com/web:v1.%d","ports":[{"containerPort":8080,"protocol":"TCP"}],`+
		`"resources":{"requests":{"cpu":"100m","memory":"128Mi"}},"imagePullPolicy":"IfNotPresent"}]},`+
		`"status":{"phase":"Running","podIP":"10.0.%d.%d","conditions":[{"type":"Ready","status":"True"}]}}`,
		i, i%3, i, rv, i%7, i%5, i/256, i%256)
}

// compressing returns a synced pipeline caching n pods at resourceVersion
// 100+i, with a reflector (not running) to ask for relists, as Run leaves
// it; the pods are listed through prepare and the queue, as a relist of
// the reflector's brings them.
func compressing(t testing.TB, n int, opts CompressionOptions) *Pipeline {
	t.Helper()
	c := &config.Config{QueueLength: 16}
	p, err := New(c, config.Resource{Resource: "pods"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.compress = opts
	p.refl = reflector.New(nil, p.encoder, p.fifo, reflector.Options{Name: "pods", Log: p.log})
	list(t, p, n, 1000)
	return p
}

// list brings the API server's list of n pods at rv through prepare, the
// encoder and the queue, and applies it; it returns the objects listed.
func list(t testing.TB, p *Pipeline, n int, rv uint64) []*object.Object {
	t.Helper()
	objs := make([]*object.Object, 0, n)
	for i := range n {
		r, err := object.ParseRaw(compressPodJSON(i, 100+uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		p.prepare(r)
		o, err := p.encoder.Encode(r)
		if err != nil {
			t.Fatalf("encode pod %d: %v", i, err)
		}
		objs = append(objs, o)
	}
	if err := p.fifo.Replace(objs, strconv.FormatUint(rv, 10)); err != nil {
		t.Fatal(err)
	}
	ds, err := p.fifo.Pop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.index.Apply(ds)
	return objs
}

// coolAll trains the pipeline's codec and cools every object.
func coolAll(t testing.TB, p *Pipeline) {
	t.Helper()
	if err := p.train(32); err != nil {
		t.Fatal(err)
	}
	for {
		if st := p.index.Cool(p.codec, 64); st.Wrapped {
			break
		}
	}
	if st := p.index.Stats(); st.Cold != st.Objects || st.StoredBytes >= st.RawBytes {
		t.Fatalf("after cooling: %+v", st)
	}
}

// events is a Listener that keeps the events told.
type events struct {
	mu  sync.Mutex
	evs []indexer.Event
}

func (e *events) OnEvent(ev indexer.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) changes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		if ev.Type != watch.Bookmark {
			out = append(out, fmt.Sprint(ev.Type, " ", ev.Object.Key))
		}
	}
	return out
}

// damageOne is an indexer.Cooler that replaces the object at key by a
// cold copy whose stored frame has one byte changed (reached with reflect:
// the package object keeps it unexported), as memory damage would.
type damageOne struct {
	codec *object.Codec
	key   string
}

func (d damageOne) Compress(o *object.Object) (*object.Object, error) {
	if o.Key != d.key {
		return nil, errors.New("not the one to damage")
	}
	cold, err := d.codec.Compress(o)
	if err != nil {
		return nil, err
	}
	c := *cold
	f := reflect.ValueOf(&c).Elem().FieldByName("data")
	data := (*[]byte)(unsafe.Pointer(f.UnsafeAddr()))
	b := bytes.Clone(*data)
	b[len(b)/2] ^= 0x5a
	*data = b
	return &c, nil
}

func (d damageOne) Stale(o *object.Object) bool { return o.Key == d.key }

// TestDamagedObjectRepairedByRelist: a reader that finds a cold object
// damaged gets ErrDamaged, the object is marked and a relist asked for;
// the relist brings the API server's copy at the same resourceVersion,
// which replaces the damaged one without any event (watchers see only real
// differences), while every other object keeps its shared cold bytes.
func TestDamagedObjectRepairedByRelist(t *testing.T) {
	const n = 40
	p := compressing(t, n, CompressionOptions{Mode: CompressionCold})
	coolAll(t, p)
	key := "ns1/web-00007"
	want := compressPodJSON(7, 107)
	before := map[string]*object.Object{}
	for _, o := range p.index.List(nil).Objects {
		before[o.Key] = o
	}
	for range 2 {
		if st := p.index.Cool(damageOne{codec: p.codec, key: key}, n); st.Recompressed > 0 {
			break
		}
	}
	bad, _ := p.index.Get(key)
	if bad == before[key] || !bad.Cold() {
		t.Fatal("the object was not replaced by a damaged cold copy")
	}
	rec := &events{}
	cancel := p.index.AddListener(rec)
	defer cancel()

	// A reader finds it.
	if p.refl.Relisting() {
		t.Fatal("a relist is due before any damage was found")
	}
	if _, err := bad.Bytes(); !errors.Is(err, object.ErrDamaged) {
		t.Fatalf("read of the damaged object: %v, want ErrDamaged", err)
	}
	if !p.index.Damaged(bad) {
		t.Error("the damaged object is not marked")
	}
	if !p.refl.Relisting() {
		t.Error("no relist asked for")
	}
	if st := p.Compression(); st.Mode != CompressionCold || st.Codec.Damaged == 0 {
		t.Errorf("Compression() = %+v, want the damage counted", st)
	}

	// The relist, at a later resourceVersion, of the same objects.
	listed := list(t, p, n, 1001)
	for _, o := range listed {
		if o.Key == key {
			if o.Cold() {
				t.Error("the relist's copy of the damaged object shares its damaged bytes")
			}
		} else if !o.Cold() {
			t.Errorf("the relist's copy of %s does not share the cached cold bytes", o.Key)
		}
	}
	if got := rec.changes(); len(got) != 0 {
		t.Errorf("the repair told watchers %q, want no event", got)
	}
	got, _ := p.index.Get(key)
	if got == bad || p.index.Damaged(bad) || p.index.Damaged(got) {
		t.Fatal("the damaged object is still cached, or still marked")
	}
	if b, err := got.Bytes(); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("the repaired object reads %q, %v; want the API server's JSON", b, err)
	}
	for k, o := range before {
		if cur, _ := p.index.Get(k); k != key && cur != o {
			t.Errorf("%s was replaced by a relist that did not change it", k)
		}
	}
	if st := p.index.Stats(); st.ResourceVersion != "1001" || st.Objects != n || st.Cold != n-1 {
		t.Errorf("after the repair: %+v", st)
	}
	// Cooled again, it reads as the API server's.
	coolAll(t, p)
	if got, _ := p.index.Get(key); !got.Cold() {
		t.Error("the repaired object was not cooled again")
	} else if b, err := got.Bytes(); err != nil || !bytes.Equal(b, want) {
		t.Errorf("the repaired object, cold, reads %q, %v", b, err)
	}
}

// TestCoolLoop runs the cooling loop in a bubble of fake time: it trains a
// dictionary once the cache is large enough, cools every object, and
// returns when its context ends.
func TestCoolLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := compressing(t, 300, CompressionOptions{Mode: CompressionCold, MinObjects: 10, Step: 16, Samples: 16})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.coolLoop(ctx)
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		st := p.index.Stats()
		if st.Cold != st.Objects || st.StoredBytes*2 > st.RawBytes {
			t.Errorf("after a minute of cooling: %d of %d objects cold, %d bytes stored for %d", st.Cold, st.Objects, st.StoredBytes, st.RawBytes)
		}
		if c := p.Compression(); c.Codec.Trainings != 1 || c.Codec.DictID == 0 {
			t.Errorf("Compression() = %+v, want one dictionary", c)
		}
		for _, o := range p.index.List(nil).Objects {
			if _, err := o.Bytes(); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		<-done
	})
}

// TestCoolLoopOff: without compression, or below MinObjects, nothing is
// trained nor cooled.
func TestCoolLoopOff(t *testing.T) {
	tests := []struct {
		name string
		opts CompressionOptions
	}{
		{name: "off"},
		{name: "too few objects", opts: CompressionOptions{Mode: CompressionCold, MinObjects: 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := compressing(t, 50, tc.opts)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					p.coolLoop(ctx)
				}()
				time.Sleep(time.Minute)
				synctest.Wait()
				if st := p.index.Stats(); st.Cold != 0 || p.codec.Current() != nil {
					t.Errorf("%d objects cooled, dictionary %v", st.Cold, p.codec.Current())
				}
				cancel()
				<-done
			})
		})
	}
}
