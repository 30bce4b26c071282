package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// Decoder turns stored JSON back into a cached object, with its index
// values computed by the current configuration. It may keep b.
type Decoder func(b []byte) (*object.Object, error)

// Loaded is a state read back.
type Loaded struct {
	// Resolved is what the resource resolved to when it was written.
	Resolved Resolved
	// Cache is the cache to restore.
	Cache indexer.Restored
	// SavedAt is when the state was last written.
	SavedAt time.Time
}

// SetAsideError says why a state was not loaded and where it was moved.
type SetAsideError struct {
	// Reason is why the state was refused.
	Reason string
	// Path is where it now is ("" if it could not be moved, and was
	// removed instead).
	Path string
}

func (e *SetAsideError) Error() string {
	if e.Path == "" {
		return "the saved state was refused and removed: " + e.Reason
	}
	return fmt.Sprintf("the saved state was refused and moved to %s: %s", e.Path, e.Reason)
}

// keepAside is how many refused states of one resource are kept for a
// person to look at; older ones are removed.
const keepAside = 3

// Load reads the resource's state. It returns nil and no error when there
// is none, and a *SetAsideError when there was one that failed a check:
// that state has been moved to the directory's aside/ folder, and the
// caller starts cold. On success the state's file stays open for Run to
// write on.
func (r *Resource) Load(decode Decoder, now time.Time) (*Loaded, error) {
	_ = os.Remove(r.path + ".new") // a whole write a crash interrupted
	fi, err := os.Stat(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, r.setAside(fmt.Sprintf("stat: %v", err))
	}
	db, l, err := r.read(fi.Size(), decode, now)
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, r.setAside(err.Error())
	}
	r.mu.Lock()
	r.db, r.pos, r.offset = db, l.pos, l.offset
	r.stats.Restored, r.stats.SavedAt = true, l.SavedAt
	r.stats.Written = l.pos.ResourceVersion
	r.mu.Unlock()
	r.resolved = l.Resolved
	return &l.Loaded, nil
}

type loaded struct {
	Loaded
	pos    position
	header header
	offset time.Duration
}

// read checks the file, then opens it for writing. A damaged file can make
// bbolt fault or panic on a page it maps; both become the error that sets
// it aside. The check runs on a read-only handle, which maps the file
// without walking its pages on another goroutine (as opening it for
// writing does, to rebuild the freelist), so that every page is first
// read here, where a fault is recovered.
func (r *Resource) read(size int64, decode Decoder, now time.Time) (db *bolt.DB, l loaded, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the file is damaged: %v", p)
		}
	}()
	ro, err := bolt.Open(r.path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, l, fmt.Errorf("open: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			ro.Close() // after a recovered fault
		}
	}()
	err = ro.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("the file is truncated: %d bytes of %d", size, tx.Size())
		}
		var err error
		l, err = r.readTx(tx, decode, now)
		return err
	})
	closed = true
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, l, err
	}
	db, err = bolt.Open(r.path, 0o600, r.boltOptions())
	if err != nil {
		return nil, l, fmt.Errorf("open: %w", err)
	}
	return db, l, nil
}

func (r *Resource) readTx(tx *bolt.Tx, decode Decoder, now time.Time) (loaded, error) {
	var l loaded
	meta, base, logb := tx.Bucket(bucketMeta), tx.Bucket(bucketBase), tx.Bucket(bucketLog)
	if meta == nil || base == nil || logb == nil {
		return l, errors.New("not an informerd state: a bucket is missing")
	}
	if err := openJSON(meta.Get(keyHeader), &l.header); err != nil {
		return l, fmt.Errorf("header: %w", err)
	}
	if err := r.check(l.header); err != nil {
		return l, err
	}
	if err := openJSON(meta.Get(keyPosition), &l.pos); err != nil {
		return l, fmt.Errorf("position: %w", err)
	}
	pos := l.pos
	rv, ok := object.ParseRV(pos.ResourceVersion)
	if !ok || rv < pos.Floor || pos.Seq < pos.FloorSeq {
		return l, fmt.Errorf("position: resourceVersion %q at seq %d before its history's start %d at seq %d", pos.ResourceVersion, pos.Seq, pos.Floor, pos.FloorSeq)
	}
	objects := map[string]*object.Object{}
	err := base.ForEach(func(k, v []byte) error {
		payload, err := open(v)
		if err != nil {
			return fmt.Errorf("object %q: %w", k, err)
		}
		o, err := decode(bytes.Clone(payload))
		if err != nil {
			return fmt.Errorf("object %q: %w", k, err)
		}
		if o.Key != string(k) {
			return fmt.Errorf("object %q holds %q", k, o.Key)
		}
		objects[o.Key] = o
		return nil
	})
	if err != nil {
		return l, err
	}
	// The log replayed on base gives the cache, and each event its Prev.
	// Times move by every downtime so far, so the history keeps what it had
	// left of its age window.
	shift := pos.Offset + max(now.Sub(pos.SavedAt), 0)
	l.offset = shift
	moved := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Add(shift)
	}
	lastSeq, lastRV := pos.FloorSeq, pos.Floor
	var events []indexer.Event
	err = logb.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("log key %x is not a sequence number", k)
		}
		seq := binary.BigEndian.Uint64(k)
		rec, err := decodeEvent(v)
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		if n, _ := object.ParseRV(rec.ResourceVersion); n != rec.RV || seq <= lastSeq || seq > pos.Seq || rec.RV < lastRV || rec.RV > rv {
			return fmt.Errorf("event %d at resourceVersion %d is out of order (after %d at %d, position %d at %d)", seq, rec.RV, lastSeq, lastRV, pos.Seq, rv)
		}
		lastSeq, lastRV = seq, rec.RV
		o, err := decode(bytes.Clone(rec.JSON))
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		if o.Key != rec.Key {
			return fmt.Errorf("event %d of %q holds %q", seq, rec.Key, o.Key)
		}
		prev := objects[o.Key]
		if (prev == nil) != (rec.Type == watch.Added) {
			return fmt.Errorf("event %d: %s of %q, which the state %s", seq, rec.Type, o.Key, map[bool]string{true: "lacks", false: "holds"}[prev == nil])
		}
		if rec.Type == watch.Deleted {
			delete(objects, o.Key)
		} else {
			objects[o.Key] = o
		}
		events = append(events, indexer.Event{
			Type: rec.Type, Object: o, Prev: prev, ResourceVersion: rec.ResourceVersion, RV: rec.RV, Seq: seq,
			Received: moved(rec.Receive), Applied: moved(rec.Applied), Relist: rec.Relist,
		})
		return nil
	})
	if err != nil {
		return l, err
	}
	objs := make([]*object.Object, 0, len(objects))
	for _, o := range objects {
		objs = append(objs, o)
	}
	l.Loaded = Loaded{
		Resolved: l.header.Resolved,
		Cache: indexer.Restored{
			Objects: objs, Events: events,
			At:    indexer.Position{ResourceVersion: pos.ResourceVersion, Seq: pos.Seq},
			Floor: pos.Floor, FloorSeq: pos.FloorSeq,
		},
		SavedAt: pos.SavedAt,
	}
	return l, nil
}

// check compares a state's header with the one this informerd writes.
func (r *Resource) check(h header) error {
	want := r.want
	switch {
	case h.Format != formatVersion:
		return fmt.Errorf("format version %d, this informerd reads version %d", h.Format, formatVersion)
	case h.Resource != want.Resource:
		return fmt.Errorf("written for resource %q, not %q", h.Resource, want.Resource)
	case h.Server != want.Server || h.CA != want.CA:
		return fmt.Errorf("written for another cluster: API server %s (CA sha256 %.12s), this informerd talks to %s (CA sha256 %.12s)", h.Server, h.CA, want.Server, want.CA)
	case h.Cluster != "" && want.Cluster != "" && h.Cluster != want.Cluster:
		return fmt.Errorf("written for another cluster behind the same API server URL and CA: kube-system namespace uid %s, this cluster's is %s", h.Cluster, want.Cluster)
	case h.Source != want.Source:
		return fmt.Errorf("written for another configuration of the resource: %+v, now %+v", h.Source, want.Source)
	case h.Resolved.Resource == "" || h.Resolved.Version == "" || h.Resolved.Kind == "":
		return errors.New("header: the resource's group, version and kind are missing")
	}
	return nil
}

// setAside moves the state to aside/, keeping the newest few, and returns
// the error that says so.
func (r *Resource) setAside(reason string) error {
	r.mu.Lock()
	r.stats.SetAside = reason
	r.mu.Unlock()
	aside := filepath.Join(r.dir.opts.Dir, "aside")
	base := strings.TrimSuffix(filepath.Base(r.path), ".db")
	dst := filepath.Join(aside, base+"-"+time.Now().UTC().Format("20060102T150405.000000000Z")+".db")
	e := &SetAsideError{Reason: reason, Path: dst}
	err := os.MkdirAll(aside, 0o700)
	if err == nil {
		err = os.Rename(r.path, dst)
	}
	if err == nil {
		_ = os.WriteFile(strings.TrimSuffix(dst, ".db")+".reason", []byte(reason+"\n"), 0o600)
		pruneAside(aside, base)
	} else {
		e.Path = ""
		_ = os.Remove(r.path)
	}
	r.log.Warn("the saved state cannot be used; starting cold", "reason", reason, "movedTo", e.Path)
	return e
}

// pruneAside removes all but the newest keepAside refused states of base.
func pruneAside(dir, base string) {
	matches, _ := filepath.Glob(filepath.Join(dir, base+"-*.db"))
	slices.Sort(matches) // the timestamp sorts them by age
	for len(matches) > keepAside {
		_ = os.Remove(matches[0])
		_ = os.Remove(strings.TrimSuffix(matches[0], ".db") + ".reason")
		matches = matches[1:]
	}
}
