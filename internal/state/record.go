package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/indexer"
)

// The file of one resource is a bbolt database with three buckets:
//
//	meta  "header"   the format version and what the state belongs to (JSON)
//	      "position" where the state stands: resourceVersion, sequence
//	                 numbers of the cache and of the history's start (JSON)
//	base  object key → the object's JSON as it was at the history's start
//	log   sequence number (8 bytes, big-endian) → one event of the history
//
// base with the log replayed on it is the cache at the position; the log
// is the history a watch resumes from. Every value starts with the CRC-32C
// of the rest, so a flipped bit is found at load instead of served.

var (
	bucketMeta = []byte("meta")
	bucketBase = []byte("base")
	bucketLog  = []byte("log")

	keyHeader   = []byte("header")
	keyPosition = []byte("position")
)

// formatVersion is the version of this file's layout and records. A file
// of another version is set aside, never read.
const formatVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum: a value whose CRC does not match its content.
var errChecksum = errors.New("checksum mismatch")

// seal prefixes payload with its CRC-32C.
func seal(payload []byte) []byte {
	out := make([]byte, 4, 4+len(payload))
	binary.BigEndian.PutUint32(out, crc32.Checksum(payload, castagnoli))
	return append(out, payload...)
}

// open checks a sealed value and returns its payload, which aliases v.
func open(v []byte) ([]byte, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("%w: a value of %d bytes is shorter than its checksum", errChecksum, len(v))
	}
	payload := v[4:]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(v) {
		return nil, errChecksum
	}
	return payload, nil
}

// header says what a state belongs to. Load refuses a state whose header
// differs from the one informerd would write now.
type header struct {
	Format int `json:"format"`
	// Resource is the resource as configured.
	Resource string `json:"resource"`
	// Server and CA identify the cluster: the API server's URL and the
	// SHA-256 of the CA bundle informerd trusts it with.
	Server string `json:"server"`
	CA     string `json:"ca"`
	// Cluster is the kube-system namespace's uid (Identity.Cluster);
	// empty when it was not known when the state was created.
	Cluster string `json:"cluster,omitempty"`
	// Source is what decides which objects the cache holds and their
	// bytes: the namespace, the selectors and the transform.
	Source Source `json:"source"`
	// Resolved is what discovery resolved the resource to, so a restart
	// serves before the API server answers.
	Resolved Resolved `json:"resolved"`
}

// position is where a written state stands.
type position struct {
	// ResourceVersion is the cache's; Seq the cache's sequence number.
	ResourceVersion string `json:"resourceVersion"`
	Seq             uint64 `json:"seq"`
	// Floor and FloorSeq are the history's start: base holds the objects
	// at Floor, and the log the events after FloorSeq.
	Floor    uint64 `json:"floor"`
	FloorSeq uint64 `json:"floorSeq"`
	// SavedAt is when it was written.
	SavedAt time.Time `json:"savedAt"`
	// Offset is how far the times of the cache that wrote it were moved
	// from the log's: the downtimes of every restart so far (the history's
	// age counts only time informerd ran). The log keeps times without it.
	Offset time.Duration `json:"offset,omitempty"`
}

func sealJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return seal(b), nil
}

func openJSON(v []byte, into any) error {
	payload, err := open(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, into)
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// eventTypes are the event types a log holds, by their byte.
var eventTypes = []watch.EventType{watch.Added, watch.Modified, watch.Deleted}

const flagRelist = 1

// logRecord is one event of the log as written.
type logRecord struct {
	Type             watch.EventType
	Relist           bool
	RV               uint64
	ResourceVersion  string
	Applied, Receive time.Time
	Key              string
	JSON             []byte
}

// encodeEvent writes ev as a sealed log value: type, flags, RV, the
// times (less offset), the cache's resourceVersion string, the key and the
// JSON.
func encodeEvent(ev indexer.Event, offset time.Duration) ([]byte, error) {
	t := -1
	for i, et := range eventTypes {
		if et == ev.Type {
			t = i
		}
	}
	if t < 0 || ev.Object == nil {
		return nil, fmt.Errorf("state: cannot write a %s event", ev.Type)
	}
	o := ev.Object
	b := make([]byte, 0, 64+len(ev.ResourceVersion)+len(o.Key)+o.Len())
	flags := byte(0)
	if ev.Relist {
		flags |= flagRelist
	}
	b = append(b, byte(t), flags)
	b = binary.AppendUvarint(b, ev.RV)
	b = binary.AppendVarint(b, unixNano(ev.Applied, offset))
	b = binary.AppendVarint(b, unixNano(ev.Received, offset))
	b = appendString(b, ev.ResourceVersion)
	b = appendString(b, o.Key)
	b, err := o.AppendBytes(b)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return seal(b), nil
}

func unixNano(t time.Time, offset time.Duration) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Add(-offset).UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errRecord: a log value that does not decode.
var errRecord = errors.New("malformed log record")

// decodeEvent reads a log value; JSON aliases v.
func decodeEvent(v []byte) (logRecord, error) {
	b, err := open(v)
	if err != nil {
		return logRecord{}, err
	}
	var r logRecord
	if len(b) < 2 || int(b[0]) >= len(eventTypes) {
		return r, errRecord
	}
	r.Type, r.Relist = eventTypes[b[0]], b[1]&flagRelist != 0
	b = b[2:]
	var n int
	if r.RV, n = binary.Uvarint(b); n <= 0 {
		return r, errRecord
	}
	b = b[n:]
	var applied, received int64
	if applied, n = binary.Varint(b); n <= 0 {
		return r, errRecord
	}
	b = b[n:]
	if received, n = binary.Varint(b); n <= 0 {
		return r, errRecord
	}
	b = b[n:]
	r.Applied, r.Receive = fromUnixNano(applied), fromUnixNano(received)
	if r.ResourceVersion, b, err = readString(b); err != nil {
		return r, err
	}
	if r.Key, b, err = readString(b); err != nil {
		return r, err
	}
	r.JSON = b
	return r, nil
}

func readString(b []byte) (string, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return "", nil, errRecord
	}
	return string(b[n : n+int(l)]), b[n+int(l):], nil
}
