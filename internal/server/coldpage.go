package server

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"google.golang.org/grpc/mem"

	"github.com/informerd/informerd/internal/object"
)

// A list page's cold objects are decompressed into one buffer of the
// page's own, borrowed from pagePool; grpc gives it back once it has
// written the page (each piece cut from it is a reference, and the last
// Free puts it back). At 200,000 cold pods, a List of one node's 2,000
// pods decompresses 6 MiB: allocated afresh, that was a garbage
// collection every few Lists of a cache whose live heap compression had
// made small, and a third of the List's CPU.

// parallelColdBytes is the decompressed size from which a page's cold
// objects are decompressed by several goroutines (at most GOMAXPROCS):
// below it, a goroutine's start costs more than it saves.
const parallelColdBytes = 256 << 10

// pagePool is a mem.BufferPool of power-of-two buffers from 1 KiB to
// 64 MiB, one sync.Pool a size: what the garbage collector empties is
// bounded by it. Larger requests (no page is: MaxPageBytes) are allocated
// and dropped. Buffers are not cleared: a page writes every byte it
// hands out.
type pagePool struct{ classes [maxPoolExp + 1]sync.Pool }

const minPoolExp, maxPoolExp = 10, 26

var coldPages = &pagePool{}

var _ mem.BufferPool = (*pagePool)(nil)

func (p *pagePool) Get(length int) *[]byte {
	exp := bits.Len(uint(max(length, 1) - 1))
	if exp > maxPoolExp {
		b := make([]byte, length)
		return &b
	}
	exp = max(exp, minPoolExp)
	if b, ok := p.classes[exp].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<exp)
	return &b
}

func (p *pagePool) Put(b *[]byte) {
	c := cap(*b)
	exp := bits.Len(uint(c)) - 1
	if c == 0 || c != 1<<exp || exp < minPoolExp || exp > maxPoolExp {
		return
	}
	*b = (*b)[:0]
	p.classes[exp].Put(b)
}

// pageJSON returns the JSON of each of objs: a hot object's own bytes,
// shared; a cold object's decompressed into one buffer borrowed from pool,
// every piece a reference to it, by several goroutines when the page is
// large (parallelColdBytes). The caller hands every piece to grpc, which
// frees them. It fails only on a damaged object (object.ErrDamaged), and
// then holds no buffer.
func pageJSON(objs []*object.Object, pool mem.BufferPool) ([]mem.Buffer, error) {
	coldLen := 0
	for _, o := range objs {
		if o.Cold() {
			coldLen += o.Len()
		}
	}
	workers := 1
	if coldLen >= parallelColdBytes {
		workers = runtime.GOMAXPROCS(0)
	}
	return pageJSONWorkers(objs, pool, workers)
}

// pageJSONWorkers is pageJSON with at most workers goroutines.
func pageJSONWorkers(objs []*object.Object, pool mem.BufferPool, workers int) ([]mem.Buffer, error) {
	jsons := make([]mem.Buffer, len(objs))
	// offs[i] is where object i's JSON starts in the buffer when cold.
	offs := make([]int, len(objs)+1)
	off, colds := 0, 0
	for i, o := range objs {
		offs[i] = off
		if !o.Cold() {
			b, _ := o.Bytes()
			jsons[i] = mem.SliceBuffer(b)
			continue
		}
		off += o.Len()
		colds++
	}
	offs[len(objs)] = off
	if colds == 0 {
		return jsons, nil
	}
	buf := pool.Get(off)
	if err := decompressInto(*buf, objs, offs, min(workers, colds)); err != nil {
		pool.Put(buf)
		return nil, err
	}
	root := mem.NewBuffer(buf, pool)
	for i, o := range objs {
		if o.Cold() {
			jsons[i] = root.Slice(offs[i], offs[i+1])
		}
	}
	root.Free() // the pieces hold it now
	return jsons, nil
}

// decompressInto decompresses objs' cold objects into buf at offs, in
// workers contiguous runs of about equal bytes, each its own goroutine but
// the first; it returns the first run's error that failed.
func decompressInto(buf []byte, objs []*object.Object, offs []int, workers int) error {
	run := func(from, to int) error {
		for i := from; i < to; i++ {
			o := objs[i]
			if !o.Cold() {
				continue
			}
			// The destination's capacity is exactly the JSON's length, so
			// it is written in place and cannot spill into the next one.
			dst := buf[offs[i]:offs[i]:offs[i+1]]
			out, err := o.AppendBytes(dst)
			if err != nil {
				return err
			}
			if len(out) == 0 || &out[0] != &buf[offs[i]] {
				return fmt.Errorf("%w: %s decompressed out of its place in the page", object.ErrDamaged, o.Key)
			}
		}
		return nil
	}
	if workers <= 1 {
		return run(0, len(objs))
	}
	total := offs[len(objs)]
	errs := make([]error, workers)
	var wg sync.WaitGroup
	from := 0
	for w := range workers {
		to := len(objs)
		if w < workers-1 {
			// The first object whose JSON starts at or after this run's
			// share of the bytes.
			want := total * (w + 1) / workers
			to = from
			for to < len(objs) && offs[to] < want {
				to++
			}
		}
		if w == workers-1 {
			errs[w] = run(from, to)
			break
		}
		f := from
		wg.Go(func() { errs[w] = run(f, to) })
		from = to
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
