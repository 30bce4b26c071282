package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/object/objecttest"
)

// countingPool is pagePool counting what it lends and gets back.
type countingPool struct {
	pagePool
	mu        sync.Mutex
	got, back int
	lent      map[*[]byte]bool
}

func (p *countingPool) Get(n int) *[]byte {
	b := p.pagePool.Get(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got++
	if p.lent == nil {
		p.lent = map[*[]byte]bool{}
	}
	p.lent[b] = true
	return b
}

func (p *countingPool) Put(b *[]byte) {
	p.mu.Lock()
	if !p.lent[b] {
		p.mu.Unlock()
		panic("Put of a buffer the pool did not lend, or twice")
	}
	delete(p.lent, b)
	p.back++
	p.mu.Unlock()
	p.pagePool.Put(b)
}

// pagePods returns n pods of varied sizes, hot, and a copy of each
// compressed with a dictionary trained on them.
func pagePods(t *testing.T, n int) (hot, cold []*object.Object) {
	t.Helper()
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	codec := object.NewCodec(object.CodecOptions{})
	var samples [][]byte
	for i := range n {
		pod := benchdata.Pod(i, 7, uint64(i+1))
		// Sizes vary, so that runs split at different objects.
		pod.Annotations = map[string]string{"pad": string(bytes.Repeat([]byte{'a' + byte(i%26)}, i*37%3000))}
		data, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		r, err := object.ParseRaw(data)
		if err != nil {
			t.Fatal(err)
		}
		o, err := enc.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		hot = append(hot, o)
		samples = append(samples, data)
	}
	if err := codec.Train(samples); err != nil {
		t.Fatal(err)
	}
	for _, o := range hot {
		c, err := codec.Compress(o)
		if err != nil {
			t.Fatal(err)
		}
		cold = append(cold, c)
	}
	return hot, cold
}

// TestPageJSON: a page mixing hot and cold objects, of sizes on both
// sides of parallelColdBytes and decompressed by 1 to 3 goroutines, gets
// every object's exact JSON; the pooled buffer goes back to the pool once,
// when grpc (here the test) has freed the last piece, and not before.
func TestPageJSON(t *testing.T) {
	hot, cold := pagePods(t, 400)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		n := 1 + rng.IntN(len(hot))
		objs, want := make([]*object.Object, n), make([][]byte, n)
		colds := 0
		for i := range n {
			k := rng.IntN(len(hot))
			want[i], _ = hot[k].Bytes()
			objs[i] = hot[k]
			if rng.IntN(4) > 0 {
				objs[i] = cold[k]
				colds++
			}
		}
		pool := &countingPool{}
		var jsons []mem.Buffer
		var err error
		if trial%2 == 0 {
			jsons, err = pageJSON(objs, pool)
		} else {
			// Forced run counts, the parallel path on small pages too.
			jsons, err = pageJSONWorkers(objs, pool, 1+trial%3)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, j := range jsons {
			if got := j.ReadOnlyData(); !bytes.Equal(got, want[i]) {
				t.Fatalf("trial %d: object %d of %d: got %d bytes, want %d", trial, i, n, len(got), len(want[i]))
			}
		}
		wantGot := 0
		if colds > 0 {
			wantGot = 1
		}
		if pool.got != wantGot || pool.back != 0 {
			t.Fatalf("trial %d (%d cold): %d buffers lent, %d back before the pieces are freed; want %d, 0", trial, colds, pool.got, pool.back, wantGot)
		}
		for _, j := range jsons {
			j.Free()
		}
		if pool.back != wantGot {
			t.Fatalf("trial %d: %d buffers back once every piece is freed, want %d", trial, pool.back, wantGot)
		}
	}
}

// TestPageJSONDamaged: a page with a damaged cold object anywhere fails
// with object.ErrDamaged, whatever run it falls in, and gives its buffer
// back.
func TestPageJSONDamaged(t *testing.T) {
	_, cold := pagePods(t, 60)
	for at := range cold {
		objs := append([]*object.Object(nil), cold...)
		objs[at] = objecttest.Corrupt(objs[at])
		for workers := 1; workers <= 3; workers++ {
			pool := &countingPool{}
			jsons, err := pageJSONWorkers(objs, pool, workers)
			if !errors.Is(err, object.ErrDamaged) || jsons != nil {
				t.Fatalf("damaged object %d, %d workers: got %d pieces, error %v; want object.ErrDamaged", at, workers, len(jsons), err)
			}
			if pool.got != 1 || pool.back != 1 {
				t.Fatalf("damaged object %d, %d workers: %d lent, %d back", at, workers, pool.got, pool.back)
			}
		}
	}
}

// TestPagePool: a buffer has the length asked for and a power-of-two
// capacity; a buffer given back is lent again at its size.
func TestPagePool(t *testing.T) {
	var p pagePool
	for _, n := range []int{1, 1000, 1024, 1025, 300 << 10, 64 << 20, 64<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		if c := cap(*b); n <= 64<<20 && (c&(c-1) != 0 || c < n) {
			t.Fatalf("Get(%d): capacity %d, not a power of two at least %d", n, c, n)
		}
		p.Put(b)
	}
	b := p.Get(5000)
	(*b)[0] = 'x'
	p.Put(b)
	// sync.Pool may drop it; when it lends it again, it is the same array.
	if c := p.Get(4097); cap(*c) != 8192 {
		t.Fatalf("Get(4097): capacity %d, want 8192", cap(*c))
	}
}
