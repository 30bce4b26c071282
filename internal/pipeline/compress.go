package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// Compression modes, the values of --cache-compression.
const (
	// CompressionOff keeps every object's JSON as it is (hot).
	CompressionOff = "off"
	// CompressionCold compresses the objects that no event of the history
	// holds any more (cold) with a dictionary of the resource's own
	// objects, and keeps the recently changed ones as they are.
	CompressionCold = "cold"
)

// CompressionOptions configure the compression of cold objects
// (--cache-compression). The zero value is off.
type CompressionOptions struct {
	// Mode is CompressionOff or CompressionCold ("" is off).
	Mode string
	// MinObjects: a cache with fewer objects is not compressed; its
	// dictionary and codec would cost more than they save. 0 means
	// DefaultCompressionMinObjects.
	MinObjects int
	// Step bounds the objects one cooling step compresses, so that the
	// indexer's write lock is held briefly; Pause is the rest between two
	// steps, Idle between two passes over the cache that found nothing to
	// compress. Zero means the defaults.
	Step        int
	Pause, Idle time.Duration
	// Samples is how many objects, spread over the cache, a dictionary is
	// trained on; MaxDictBytes bounds its size; RetrainAfter is the least
	// time between two trainings. Zero means the defaults.
	Samples      int
	MaxDictBytes int
	RetrainAfter time.Duration
}

// Defaults of CompressionOptions.
const (
	DefaultCompressionMinObjects   = 256
	DefaultCompressionStep         = 256
	DefaultCompressionPause        = 2 * time.Millisecond
	DefaultCompressionIdle         = 5 * time.Second
	DefaultCompressionSamples      = 256
	DefaultCompressionRetrainAfter = 10 * time.Minute
)

func (o CompressionOptions) withDefaults() CompressionOptions {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&o.MinObjects, DefaultCompressionMinObjects)
	set(&o.Step, DefaultCompressionStep)
	set(&o.Samples, DefaultCompressionSamples)
	set(&o.MaxDictBytes, object.DefaultMaxDictBytes)
	setD(&o.Pause, DefaultCompressionPause)
	setD(&o.Idle, DefaultCompressionIdle)
	setD(&o.RetrainAfter, DefaultCompressionRetrainAfter)
	return o
}

// WithCompression compresses every resource's cold objects as o says
// (--cache-compression); without it, none are.
func WithCompression(o CompressionOptions) Option {
	return func(s *Set) { s.compression = o }
}

// Compression describes a resource's compression: its mode and its
// codec's figures. The objects' own figures are in Status.Cache.
type Compression struct {
	Mode  string
	Codec object.CodecStats
}

// Compression returns the resource's compression figures.
func (p *Pipeline) Compression() Compression {
	mode := p.compress.Mode
	if mode == "" {
		mode = CompressionOff
	}
	return Compression{Mode: mode, Codec: p.codec.Stats()}
}

// onDamage is told by the codec of a read that found a cold object's
// stored bytes damaged, from the reader's goroutine: the object is
// remembered, so that the relist asked for here replaces it (the API
// server's copy at the same resourceVersion), and nothing damaged is
// served meanwhile (the reader gets object.ErrDamaged).
func (p *Pipeline) onDamage(o *object.Object, err error) {
	p.index.MarkDamaged(o)
	p.mu.Lock()
	refl := p.refl
	p.mu.Unlock()
	if refl != nil {
		refl.Relist(err)
	}
}

// coolLoop compresses the cache's cold objects until ctx ends: it trains
// the resource's dictionary on a sample of the cache once the cache is
// synced and large enough, then visits the cache in steps of at most Step
// objects (Indexer.Cool), resting Pause between steps and Idle once a
// whole pass found nothing to do (the encoder's memory is then released).
// When the codec says the cache has drifted from the dictionary's sample,
// it trains a new one, at most every RetrainAfter and only once no object
// of an older dictionary is left in the cache: two dictionaries at most are
// in use, the current one and the one it replaces while the cache is
// compressed again.
func (p *Pipeline) coolLoop(ctx context.Context) {
	o := p.compress.withDefaults()
	if o.Mode != CompressionCold {
		return
	}
	select {
	case <-p.index.HasSynced():
	case <-ctx.Done():
		return
	}
	var lastTrain time.Time
	var pass indexer.CoolStep
	migrated := true // no object of an older dictionary in the last full pass
	for {
		pause := o.Pause
		switch {
		case p.index.Stats().Objects < o.MinObjects:
			pause = o.Idle
		case p.codec.Current() == nil,
			p.codec.Drifted() && migrated && time.Since(lastTrain) >= o.RetrainAfter:
			lastTrain = time.Now()
			if err := p.train(o.Samples); err != nil {
				p.log.Warn("compression dictionary not trained; objects stay as they are", "err", err)
				pause = o.Idle
			}
		default:
			step := p.index.Cool(p.codec, o.Step)
			pass.Cooled += step.Cooled
			pass.Recompressed += step.Recompressed
			pass.Stale += step.Stale
			if step.Wrapped {
				migrated = pass.Stale == 0
				if pass.Cooled+pass.Recompressed == 0 {
					p.codec.Release()
					pause = o.Idle
				}
				pass = indexer.CoolStep{}
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// train trains a new dictionary on n objects spread over the cache.
func (p *Pipeline) train(n int) error {
	objs := p.index.Sample(n)
	samples := make([][]byte, 0, len(objs))
	for _, o := range objs {
		b, err := o.Bytes()
		if err != nil {
			continue // damaged: reported, and relisted
		}
		samples = append(samples, b)
	}
	if err := p.codec.Train(samples); err != nil {
		return fmt.Errorf("train on %d objects: %w", len(samples), err)
	}
	st := p.codec.Stats()
	p.log.Info("compression dictionary trained", "dictionary", st.DictID, "bytes", st.DictBytes, "samples", len(samples))
	return nil
}
