package object

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// DefaultMaxDictBytes bounds a dictionary's content unless CodecOptions
// set another bound: a few objects of each shape the resource has.
const DefaultMaxDictBytes = 32 << 10

// Drift: a dictionary trained on a sample of the cache compresses the
// objects of the first driftWindow raw bytes compressed with it at some
// ratio (its baseline); when a later window's ratio falls below
// driftFactor times the baseline, the cache has drifted from the sample
// and Drifted says so.
const (
	driftWindow = 4 << 20
	driftFactor = 0.75
)

// wellCovered is the compression ratio at which a sample is covered by the
// dictionary built so far: objects of its shape are already in it.
const wellCovered = 8

// ErrNoDict: Compress before the codec has a dictionary (Train).
var ErrNoDict = errors.New("object: no compression dictionary trained")

// CodecOptions tune a Codec.
type CodecOptions struct {
	// MaxDictBytes bounds a dictionary's content; 0 means
	// DefaultMaxDictBytes.
	MaxDictBytes int
}

// Codec makes the cold copies of one resource's objects: zstd frames, each
// with its content checksum, compressed against a raw-content dictionary
// of the resource's own objects (Train). Compress, Train and Release are
// called by one goroutine at a time (the resource's cooling loop) and
// serialize on the codec's lock; Stale, Current, Drifted and Stats may be
// called concurrently with anything, and so may the Bytes of the objects
// it made.
type Codec struct {
	maxDict int

	current  atomic.Pointer[Dict]
	onDamage atomic.Pointer[func(*Object, error)]
	damages  atomic.Int64
	trains   atomic.Int64
	drifted  atomic.Bool

	mu      sync.Mutex
	enc     *zstd.Encoder // for current; nil until needed, and after Release
	scratch []byte
	lastID  uint32
	// baseline is the first window's raw/stored ratio after training (0
	// until known); winRaw and winStored add up the current window.
	baseline          float64
	winRaw, winStored int64
}

// NewCodec returns a codec without a dictionary.
func NewCodec(opts CodecOptions) *Codec {
	if opts.MaxDictBytes <= 0 {
		opts.MaxDictBytes = DefaultMaxDictBytes
	}
	return &Codec{maxDict: opts.MaxDictBytes}
}

// OnDamage sets fn to be told of each read that finds an object this
// codec compressed damaged, from the reader's goroutine: it must not block
// nor read the object again.
func (c *Codec) OnDamage(fn func(*Object, error)) { c.onDamage.Store(&fn) }

func (c *Codec) reportDamage(o *Object, err error) {
	c.damages.Add(1)
	if fn := c.onDamage.Load(); fn != nil {
		(*fn)(o, err)
	}
}

// Current returns the dictionary Compress uses; nil before Train.
func (c *Codec) Current() *Dict { return c.current.Load() }

// Stale reports whether o is cold with a dictionary other than the
// current one: a cooling pass compresses it again, so that the older
// dictionary can go.
func (c *Codec) Stale(o *Object) bool {
	return o.dict != nil && o.dict != c.current.Load()
}

// Drifted reports whether the objects compressed lately compress
// markedly worse than those compressed right after training: the cache
// has drifted from the sample the dictionary was trained on.
func (c *Codec) Drifted() bool { return c.drifted.Load() }

// CodecStats are a codec's figures.
type CodecStats struct {
	// DictID and DictBytes describe the current dictionary (0 before
	// training).
	DictID    uint32
	DictBytes int
	// Trainings counts the dictionaries trained; Damaged the reads that
	// found a cold object's stored bytes damaged.
	Trainings, Damaged int64
}

// Stats returns the codec's figures.
func (c *Codec) Stats() CodecStats {
	s := CodecStats{Trainings: c.trains.Load(), Damaged: c.damages.Load()}
	if d := c.current.Load(); d != nil {
		s.DictID, s.DictBytes = d.id, len(d.content)
	}
	return s
}

// Train makes a dictionary from samples, JSON of the resource's objects
// spread over the cache, and makes it the one Compress uses. The objects
// compressed with the previous one still read with it. The dictionary
// holds whole samples, chosen greedily: each that the samples already
// chosen do not cover (wellCovered) joins, then the others fill the room
// left, up to MaxDictBytes.
func (c *Codec) Train(samples [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	content, err := buildDict(samples, c.maxDict)
	if err != nil {
		return err
	}
	id := c.lastID + 1
	d, err := newDict(id, content, c)
	if err != nil {
		return err
	}
	enc, err := newEncoder(id, content)
	if err != nil {
		return err
	}
	c.closeEncoderLocked()
	c.lastID, c.enc = id, enc
	c.baseline, c.winRaw, c.winStored = 0, 0, 0
	c.current.Store(d)
	c.drifted.Store(false)
	c.trains.Add(1)
	return nil
}

// Compress returns a cold copy of o compressed with the current
// dictionary: o itself is not changed. A cold o of an older dictionary is
// decompressed first; one that is damaged returns the error Bytes does.
func (c *Codec) Compress(o *Object) (*Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.current.Load()
	if d == nil {
		return nil, ErrNoDict
	}
	json, err := o.Bytes()
	if err != nil {
		return nil, err
	}
	if len(json) == 0 {
		// zstd makes no frame of empty content: its cold copy would not
		// read back. There is nothing to save either.
		return nil, fmt.Errorf("compress %s: no JSON to compress", o.Key)
	}
	if len(json) > maxDecoded { // which no decoder of the codec's would read back
		return nil, fmt.Errorf("compress %s: %d bytes is more than a cold object holds", o.Key, len(json))
	}
	if c.enc == nil {
		if c.enc, err = newEncoder(d.id, d.content); err != nil {
			return nil, err
		}
	}
	c.scratch = c.enc.EncodeAll(json, c.scratch[:0])
	cold := *o
	cold.data, cold.dict, cold.rawLen = bytes.Clone(c.scratch), d, uint32(len(json))
	if cap(c.scratch) > 1<<20 {
		c.scratch = nil // one large object's buffer is not kept
	}
	c.observeLocked(len(json), len(cold.data))
	return &cold, nil
}

// observeLocked adds one compression to the drift window.
func (c *Codec) observeLocked(raw, stored int) {
	c.winRaw += int64(raw)
	c.winStored += int64(stored)
	if c.winRaw < driftWindow {
		return
	}
	ratio := float64(c.winRaw) / float64(c.winStored)
	c.winRaw, c.winStored = 0, 0
	if c.baseline == 0 {
		c.baseline = ratio
		return
	}
	if ratio < driftFactor*c.baseline {
		c.drifted.Store(true)
	}
}

// Release frees the encoder's memory (several hundred KiB) until the next
// Compress: the cooling loop calls it when it has nothing left to cool.
func (c *Codec) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeEncoderLocked()
	c.scratch = nil
}

func (c *Codec) closeEncoderLocked() {
	if c.enc != nil {
		_ = c.enc.Close()
		c.enc = nil
	}
}

// newEncoder returns an encoder for EncodeAll against a raw-content
// dictionary: the fastest level (cooling runs beside the serving, and
// the dictionary, not the level, makes the ratio), single-segment frames
// with their content size and checksum.
func newEncoder(id uint32, content []byte) (*zstd.Encoder, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderDictRaw(id, content),
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(true),
		zstd.WithSingleSegment(true),
	)
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc, nil
}

// maxDecoded bounds what a decoder allocates for one frame, whatever a
// damaged header claims (the header is checked against the object first).
const maxDecoded = 256 << 20

func newDict(id uint32, content []byte, c *Codec) (*Dict, error) {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderDictRaw(id, content),
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(maxDecoded),
	)
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &Dict{id: id, content: content, dec: dec, codec: c}, nil
}

// buildDict chooses the dictionary's content from samples (see Train).
func buildDict(samples [][]byte, max int) ([]byte, error) {
	var content []byte
	var enc *zstd.Encoder
	defer func() {
		if enc != nil {
			_ = enc.Close()
		}
	}()
	chosen := make([]bool, len(samples))
	var scratch []byte
	for i, s := range samples {
		if len(content) >= max {
			break
		}
		if len(s) == 0 {
			continue
		}
		if enc != nil {
			scratch = enc.EncodeAll(s, scratch[:0])
			if len(scratch)*wellCovered <= len(s) {
				continue
			}
			_ = enc.Close()
		}
		content = append(content, s[:min(len(s), max-len(content))]...)
		chosen[i] = true
		var err error
		if enc, err = newEncoder(1, content); err != nil {
			return nil, err
		}
	}
	for i, s := range samples {
		if len(content) >= max {
			break
		}
		if !chosen[i] {
			content = append(content, s[:min(len(s), max-len(content))]...)
		}
	}
	if len(content) == 0 {
		return nil, errors.New("object: no samples to train a compression dictionary on")
	}
	return bytes.Clone(content), nil
}
