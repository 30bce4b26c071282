package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/indexer"
)

// Resource is the state of one cached resource. Load is called at most
// once, before Run; Run once; OnEvent by the cache; Stats at any time.
type Resource struct {
	dir  *Dir
	path string
	want header // without Resolved
	log  *slog.Logger

	// resolved is set by Load or Run, and read by Run only.
	resolved Resolved

	// The cache's side: changes seen, and the mark of the last write.
	seen      atomic.Int64 // changes told by OnEvent
	marked    atomic.Int64 // seen when the last successful write started
	oldest    atomic.Int64 // unix-nano time of the oldest unwritten change; 0 if none
	kick      chan struct{}
	bumpErr   atomic.Bool // a write failed: kicks wait for the retry
	discarded atomic.Bool // set aside by Discard: nothing more is written

	mu    sync.Mutex
	db    *bolt.DB // nil until written or loaded
	pos   position
	stats Stats
	// offset is how far the cache's times are from the log's (see
	// position.Offset); set by Load.
	offset time.Duration
}

func newResource(d *Dir, name string, src Source) *Resource {
	return &Resource{
		dir:  d,
		path: filepath.Join(d.opts.Dir, fileName(name)),
		want: header{Format: formatVersion, Resource: name, Server: d.opts.Identity.Server, CA: d.opts.Identity.CA, Cluster: d.opts.Identity.Cluster, Source: src},
		log:  d.opts.Log.With("resource", name, "stateFile", filepath.Join(d.opts.Dir, fileName(name))),
		kick: make(chan struct{}, 1),
	}
}

// Path is the state's file.
func (r *Resource) Path() string { return r.path }

// Discard closes a loaded state and sets it aside for reason; nothing is
// written any more.
func (r *Resource) Discard(reason string) error {
	r.discarded.Store(true)
	r.close()
	r.mu.Lock()
	r.pos, r.stats.Restored = position{}, false
	r.mu.Unlock()
	return r.setAside(reason)
}

// Stats describe a resource's state.
type Stats struct {
	// Restored is set when the cache was restored from this state at
	// start; SavedAt is when the restored state was written.
	Restored bool
	SavedAt  time.Time
	// SetAside is why the state found at start was refused, if it was.
	SetAside string
	// Written is the resourceVersion the state on disk reaches; LastWrite
	// when it was written.
	Written   string
	LastWrite time.Time
	// LagEvents counts the changes not yet written; Oldest is when the
	// oldest of them was applied (zero when none).
	LagEvents int64
	Oldest    time.Time
	// Writes counts successful writes, FullWrites those of the whole
	// state, WriteErrors the failed ones; LastError is the last failure,
	// cleared by the next success.
	Writes, FullWrites, WriteErrors int64
	LastError                       string
	// WriteSeconds is the time spent writing.
	WriteSeconds float64
	// Bytes is the file's size.
	Bytes int64
}

// Stats returns the state's figures.
func (r *Resource) Stats() Stats {
	r.mu.Lock()
	s := r.stats
	r.mu.Unlock()
	s.LagEvents = max(r.seen.Load()-r.marked.Load(), 0)
	if n := r.oldest.Load(); n != 0 && s.LagEvents > 0 {
		s.Oldest = time.Unix(0, n)
	}
	return s
}

var _ indexer.Listener = (*Resource)(nil)

// OnEvent implements indexer.Listener: it counts a change and signals Run
// when a batch is due. It never blocks.
func (r *Resource) OnEvent(ev indexer.Event) {
	if ev.Type == watch.Bookmark {
		return
	}
	r.oldest.CompareAndSwap(0, ev.Applied.UnixNano())
	if r.seen.Add(1)-r.marked.Load() >= int64(r.dir.opts.FlushEvents) && !r.bumpErr.Load() {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Run writes the cache's changes until ctx ends, then writes what is left
// and closes the file. The first write after a cold start writes the whole
// cache once it has synced. A failed write is counted, reported by Stats
// and retried with backoff; serving never waits for it.
func (r *Resource) Run(ctx context.Context, ix *indexer.Indexer, resolved Resolved) error {
	r.resolved = resolved
	stop := ix.AddListener(r)
	defer stop()
	defer r.close()
	select {
	case <-ix.HasSynced():
	case <-ctx.Done():
		return nil
	}
	tick := time.NewTicker(r.dir.opts.FlushInterval)
	defer tick.Stop()
	var retryAt time.Time
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			// The last write also records when informerd stopped, from
			// which the next start counts the downtime.
			if err := r.flushWith(ix, true); err != nil {
				r.log.Error("the state could not be written at shutdown; the next start resumes from the last write", "err", err)
			}
			return nil
		case <-tick.C:
		case <-r.kick:
		}
		if time.Now().Before(retryAt) {
			continue
		}
		if err := r.flush(ix); err != nil {
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			retryAt = time.Now().Add(backoff)
			r.bumpErr.Store(true)
			continue
		}
		backoff, retryAt = 0, time.Time{}
		r.bumpErr.Store(false)
	}
}

func (r *Resource) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.db != nil {
		if err := r.db.Close(); err != nil {
			r.log.Warn("close the state file", "err", err)
		}
		r.db = nil
	}
}

// flush writes the changes since the last write: in place when the cache's
// history still holds them, else the whole cache into a new file.
func (r *Resource) flush(ix *indexer.Indexer) error { return r.flushWith(ix, false) }

// flushWith flushes; with always, it writes the position even when nothing
// changed.
func (r *Resource) flushWith(ix *indexer.Indexer, always bool) error {
	mark, start := r.seen.Load(), time.Now()
	full, err := r.write(ix, always)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.WriteSeconds += time.Since(start).Seconds()
	if err != nil {
		r.stats.WriteErrors++
		if r.stats.LastError != err.Error() {
			r.log.Error("the state could not be written; serving goes on, and the write is retried", "err", err)
		}
		r.stats.LastError = err.Error()
		return err
	}
	if full {
		r.stats.FullWrites++
	}
	r.stats.Writes++
	r.stats.LastError = ""
	r.stats.Written, r.stats.LastWrite = r.pos.ResourceVersion, r.pos.SavedAt
	if fi, err := os.Stat(r.path); err == nil {
		r.stats.Bytes = fi.Size()
	}
	r.marked.Store(mark)
	if r.seen.Load() == mark {
		r.oldest.Store(0)
	} else {
		r.oldest.Store(start.UnixNano())
	}
	return nil
}

// maxBatch bounds the events one transaction writes.
const maxBatch = 4096

func (r *Resource) write(ix *indexer.Indexer, always bool) (full bool, err error) {
	if r.discarded.Load() {
		return false, nil
	}
	r.mu.Lock()
	db, pos := r.db, r.pos
	r.mu.Unlock()
	if db == nil {
		return true, r.writeFull(ix)
	}
	for {
		ch, err := ix.ChangesAfter(pos.Seq, maxBatch)
		if errors.Is(err, indexer.ErrTooOld) {
			// The writer fell behind the history window.
			return true, r.writeFull(ix)
		}
		if err != nil {
			return false, err
		}
		if len(ch.Events) == 0 && ch.At == (indexer.Position{ResourceVersion: pos.ResourceVersion, Seq: pos.Seq}) && ch.FloorSeq == pos.FloorSeq && !always {
			return false, nil
		}
		always = false
		next := position{ResourceVersion: ch.At.ResourceVersion, Seq: ch.At.Seq, Floor: ch.Floor, FloorSeq: ch.FloorSeq, SavedAt: time.Now(), Offset: r.offset}
		if err := db.Update(func(tx *bolt.Tx) error { return appendTx(tx, ch.Events, next) }); err != nil {
			return false, fmt.Errorf("write %d changes to %s: %w", len(ch.Events), r.path, err)
		}
		r.mu.Lock()
		r.pos, pos = next, next
		r.mu.Unlock()
		if ch.CaughtUp {
			return false, nil
		}
	}
}

// appendTx appends events to the log, folds the events that left the
// history window into base, and moves the position.
func appendTx(tx *bolt.Tx, events []indexer.Event, next position) error {
	logb, base, meta := tx.Bucket(bucketLog), tx.Bucket(bucketBase), tx.Bucket(bucketMeta)
	for _, ev := range events {
		v, err := encodeEvent(ev, next.Offset)
		if err != nil {
			return err
		}
		if err := logb.Put(seqKey(ev.Seq), v); err != nil {
			return err
		}
	}
	var folded [][]byte
	c := logb.Cursor()
	for k, v := c.First(); k != nil && bytesLE(k, seqKey(next.FloorSeq)); k, v = c.Next() {
		rec, err := decodeEvent(v)
		if err != nil {
			return fmt.Errorf("fold event %x: %w", k, err)
		}
		if rec.Type == watch.Deleted {
			err = base.Delete([]byte(rec.Key))
		} else {
			err = base.Put([]byte(rec.Key), seal(rec.JSON))
		}
		if err != nil {
			return err
		}
		folded = append(folded, k)
	}
	for _, k := range folded {
		if err := logb.Delete(k); err != nil {
			return err
		}
	}
	p, err := sealJSON(next)
	if err != nil {
		return err
	}
	return meta.Put(keyPosition, p)
}

func bytesLE(a, b []byte) bool { return string(a) <= string(b) }

// fullChunk bounds the objects or events one transaction of a full write
// holds, and so the memory bbolt keeps dirty.
const fullChunk = 1024

// writeFull writes a checkpoint of the whole cache into a new file and
// renames it over the old one: a crash leaves one or the other, whole.
func (r *Resource) writeFull(ix *indexer.Indexer) error {
	cp, err := ix.Checkpoint()
	if err != nil {
		return err
	}
	tmp := r.path + ".new"
	_ = os.Remove(tmp)
	opts := r.boltOptions()
	opts.NoSync = true // one fsync at the end
	db, err := bolt.Open(tmp, 0o600, opts)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	next := position{ResourceVersion: cp.At.ResourceVersion, Seq: cp.At.Seq, Floor: cp.Floor, FloorSeq: cp.FloorSeq, SavedAt: time.Now(), Offset: r.offset}
	err = r.fill(db, cp, next)
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.replace(tmp)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write the whole state to %s: %w", r.path, err)
	}
	db, err = bolt.Open(r.path, 0o600, r.boltOptions())
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("open %s: %w", r.path, err)
	}
	r.db, r.pos = db, next
	return nil
}

// fill writes a checkpoint into an empty database, in transactions of
// fullChunk values; the position goes last, so a file without one was
// never finished.
func (r *Resource) fill(db *bolt.DB, cp indexer.Checkpoint, next position) error {
	h := r.want
	h.Resolved = r.resolved
	hv, err := sealJSON(h)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketBase, bucketLog} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyHeader, hv)
	})
	if err != nil {
		return err
	}
	for {
		// Taken, not read: each written page is let go of (TakeBase).
		objs := cp.TakeBase(fullChunk)
		if len(objs) == 0 {
			break
		}
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketBase)
			for _, o := range objs {
				json, err := o.Bytes()
				if err != nil {
					return err
				}
				if err := b.Put([]byte(o.Key), seal(json)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for evs := cp.Events; len(evs) > 0; {
		n := min(len(evs), fullChunk)
		chunk := evs[:n]
		evs = evs[n:]
		last := len(evs) == 0
		err := db.Update(func(tx *bolt.Tx) error {
			if last {
				return appendTx(tx, chunk, next)
			}
			b := tx.Bucket(bucketLog)
			for _, ev := range chunk {
				v, err := encodeEvent(ev, next.Offset)
				if err != nil {
					return err
				}
				if err := b.Put(seqKey(ev.Seq), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(cp.Events) > 0 {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error { return appendTx(tx, nil, next) })
}

// replace renames tmp over the state file, after closing the old one, and
// makes the rename durable.
func (r *Resource) replace(tmp string) error {
	if r.discarded.Load() {
		return errors.New("the state was set aside")
	}
	r.close()
	if err := os.Rename(tmp, r.path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(r.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (r *Resource) boltOptions() *bolt.Options {
	return &bolt.Options{
		Timeout: time.Second,
		// The freelist is rebuilt at open instead of written at every
		// commit, as etcd does.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		OpenFile:       r.dir.opts.openFile,
	}
}
