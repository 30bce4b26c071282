package kubeapi

import (
	"bytes"
	"errors"
	"hash/maphash"
	"sync"

	"github.com/buger/jsonparser"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/printers"
)

// form is a way of encoding a cached object other than its cached JSON,
// which some readers ask for.
type form uint8

const (
	// formNoManagedFields: the JSON without metadata.managedFields.
	formNoManagedFields form = iota + 1
	// formMetadata, formMetadataBeta: PartialObjectMetadata of
	// meta.k8s.io/v1 or v1beta1; formMetadataNoManagedFields,
	// formMetadataBetaNoManagedFields: the same without
	// metadata.managedFields.
	formMetadata
	formMetadataBeta
	formMetadataNoManagedFields
	formMetadataBetaNoManagedFields
	// formProtobuf, formProtobufNoManagedFields: the object's bare
	// protobuf message, with or without metadata.managedFields;
	// formProtobufMetadata, formProtobufMetadataNoManagedFields: its
	// PartialObjectMetadata's (the same in v1 and v1beta1).
	formProtobuf
	formProtobufNoManagedFields
	formProtobufMetadata
	formProtobufMetadataNoManagedFields
	// formProtobufObject and the rest: the same messages in the envelope
	// the API server writes one object in (a get, a watch event), typed
	// as the object or as PartialObjectMetadata of v1 or v1beta1.
	formProtobufObject
	formProtobufObjectNoManagedFields
	formProtobufMetadataObject
	formProtobufMetadataObjectNoManagedFields
	formProtobufMetadataBetaObject
	formProtobufMetadataBetaObjectNoManagedFields
	// formTableNone, formTableMetadata, formTableObject: with an event
	// type only (a frame), a Table watch's event after its first (one
	// row, no column definitions) with includeObject None, Metadata or
	// Object; its key also names the columns and the second it is
	// printed at (tableFrame).
	formTableNone
	formTableMetadata
	formTableObject
)

// DefaultMaxFormBytes bounds the bytes of the encodings forms keep.
const DefaultMaxFormBytes = 64 << 20

// forms keeps the other forms of cached objects, so that each object
// version is encoded at most once per form while it is recent, for every
// reader: one event fanned out to thousands of metadata watchers is cut
// once (as the API server's cachingObject encodes an event once per
// serializer). Objects are immutable, so an object pointer and a form name
// one encoding for as long as the entry lives. Bounded by bytes: entries
// leave in the order they came (a FIFO per shard), which suits a stream of
// events; a cold list encodes again. Readers that miss the same key at once
// wait for the first one's encoding instead of each making it, as every
// watcher of an event wakes at once: the API server's cachingObject
// encodes under a sync.Once per serializer for the same reason. Safe for
// concurrent use.
//
// forms also keep whole watch frames (frames.go): an event's frame in an
// encoding, {"type":…,"object":…} and its newline or a protobuf frame, for
// every watcher that writes that event alone, as the API server's
// cachingObject keeps a watch event's encoding per event type and
// encoder; a frame's key names its event type (formKey.event).
type forms struct {
	seed   maphash.Seed
	shards [formShards]formShard
}

const formShards = 16

// formKey names one encoding: an object version in form f, and for a
// Table frame what else the frame depends on.
type formKey struct {
	o *object.Object
	f form
	// event, when not 0, makes the key a whole watch frame of form f
	// with this event type (eventCode): one object version is ADDED to a
	// watcher whose selection it enters and MODIFIED to one it was
	// already in.
	event uint8
	// gzip makes a frame's key its gzip member, as a compressed WatchList
	// flushes the frame alone (gzipMember).
	gzip bool
	// printer and cols are a Table's columns: a built-in resource's
	// printer, else the CRD's columns as fetched (a refetch is another
	// key); at is the Unix second its ages are printed at.
	printer *printers.Printer
	cols    *columns
	at      int64
}

type formShard struct {
	mu    sync.Mutex
	m     map[formKey][]byte
	order []formKey // oldest first, from head
	head  int
	bytes int
	max   int
	// making holds the encodings being made, for readers of the same key
	// to wait on; an entry leaves when its encoding is kept or fails.
	making map[formKey]*making
}

// making is one encoding being made: done closes when b and err are set.
type making struct {
	done chan struct{}
	b    []byte
	err  error
}

func newForms(maxBytes int) *forms {
	f := &forms{seed: maphash.MakeSeed()}
	for i := range f.shards {
		f.shards[i].m = map[formKey][]byte{}
		f.shards[i].making = map[formKey]*making{}
		f.shards[i].max = max(1, maxBytes/formShards)
	}
	return f
}

// get returns o in form f, encoding it with encode once while it is kept.
// An encoding that fails is not kept; nil is returned with the error.
func (fs *forms) get(o *object.Object, f form, encode func(*object.Object) ([]byte, error)) ([]byte, error) {
	return fs.keep(formKey{o: o, f: f}, func() ([]byte, error) { return encode(o) })
}

// keep returns the encoding k names, made with encode once while it is
// kept: a reader that asks while another makes it waits for that one's
// result, error included.
func (fs *forms) keep(k formKey, encode func() ([]byte, error)) ([]byte, error) {
	s := &fs.shards[maphash.String(fs.seed, k.o.Key)%formShards]
	s.mu.Lock()
	if b, ok := s.m[k]; ok {
		s.mu.Unlock()
		return b, nil
	}
	if mk, ok := s.making[k]; ok {
		s.mu.Unlock()
		<-mk.done
		return mk.b, mk.err
	}
	mk := &making{done: make(chan struct{})}
	s.making[k] = mk
	s.mu.Unlock()

	// Waiters are released even if encode panics: the panic goes on up
	// this reader's stack, theirs see an error.
	mk.err = errEncodingPanicked
	defer func() {
		s.mu.Lock()
		delete(s.making, k)
		if mk.err == nil {
			s.add(k, mk.b)
		}
		s.mu.Unlock()
		close(mk.done)
	}()
	mk.b, mk.err = encode()
	if mk.err != nil {
		mk.b = nil
	}
	return mk.b, mk.err
}

// errEncodingPanicked is what readers waiting for an encoding get when
// the reader making it panicked.
var errEncodingPanicked = errors.New("kubeapi: encoding an object's form panicked")

// add keeps b under k unless it is too big to keep, dropping the oldest
// entries past the shard's bytes. The caller holds s.mu.
func (s *formShard) add(k formKey, b []byte) {
	if len(b) > s.max {
		return
	}
	s.m[k] = b
	s.order = append(s.order, k)
	s.bytes += len(b)
	for s.bytes > s.max {
		old := s.order[s.head]
		s.order[s.head] = formKey{}
		s.head++
		s.bytes -= len(s.m[old])
		delete(s.m, old)
	}
	if s.head > len(s.order)/2 {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}

func withoutManagedFields(data []byte) []byte {
	if _, _, _, err := jsonparser.Get(data, "metadata", "managedFields"); err != nil {
		return data
	}
	return jsonparser.Delete(bytes.Clone(data), "metadata", "managedFields")
}

// partialObjectMetadata cuts PartialObjectMetadata of apiVersion from an
// object's JSON, without decoding the object: its metadata as it is.
func partialObjectMetadata(data []byte, apiVersion string) ([]byte, error) {
	meta, _, _, err := jsonparser.Get(data, "metadata")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(meta)+64)
	out = append(out, `{"kind":"PartialObjectMetadata","apiVersion":"`...)
	out = append(out, apiVersion...)
	out = append(out, `","metadata":`...)
	out = append(out, meta...)
	return append(out, '}'), nil
}

// form is the encoding out asks for an object in, 0 for the cached JSON.
func (out *output) form() form {
	meta := out.as == asMetadata || out.as == asMetadataList
	beta := out.metaGV.Version == "v1beta1"
	switch {
	case meta && beta && out.dropManagedFields:
		return formMetadataBetaNoManagedFields
	case meta && beta:
		return formMetadataBeta
	case meta && out.dropManagedFields:
		return formMetadataNoManagedFields
	case meta:
		return formMetadata
	case out.dropManagedFields:
		return formNoManagedFields
	}
	return 0
}

// encodeForm encodes an object's JSON in a JSON form.
func encodeForm(data []byte, f form) ([]byte, error) {
	switch f {
	case formNoManagedFields:
		return withoutManagedFields(data), nil
	case formMetadata:
		return partialObjectMetadata(data, "meta.k8s.io/v1")
	case formMetadataBeta:
		return partialObjectMetadata(data, "meta.k8s.io/v1beta1")
	case formMetadataNoManagedFields:
		return partialObjectMetadata(withoutManagedFields(data), "meta.k8s.io/v1")
	case formMetadataBetaNoManagedFields:
		return partialObjectMetadata(withoutManagedFields(data), "meta.k8s.io/v1beta1")
	}
	return data, nil
}
