package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/object"
)

// encoded is a response already in protobuf wire form, in pieces that
// codec hands to grpc as they are. Pieces may be shared with other messages
// (an object's JSON is, by every response that carries it), so nothing may
// modify them once the message is built; grpc only reads them. One
// goroutine builds a message and sends it once.
type encoded struct {
	pieces mem.BufferSlice
	inline [2]mem.Buffer // the pieces of a one-object message, in place
}

func newEncoded() *encoded {
	m := &encoded{}
	m.pieces = m.inline[:0]
	return m
}

// add appends b as the next piece. A SliceBuffer's Free does nothing, so
// grpc never recycles b into a pool; the only pooled pieces are a list
// page's cold JSON (pageJSON).
func (m *encoded) add(b []byte) {
	if len(b) > 0 {
		m.pieces = append(m.pieces, mem.SliceBuffer(b))
	}
}

// codec is grpc's "proto" codec, except that it sends an encoded message
// without marshaling or copying it. Clients see ordinary protobuf under the
// same name, so every client keeps working. It is safe for concurrent use.
type codec struct{ proto encoding.CodecV2 }

var _ encoding.CodecV2 = codec{}

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

// Marshal returns an encoded message's pieces as they are.
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*encoded); ok {
		return m.pieces, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (codec) Name() string { return "proto" }

// decoded unmarshals m, the response encode just built, into msg, as a
// client does, and returns msg; err, the encoder's, passes through. The
// methods that answer callers in process with messages (List, Get) use it.
func decoded[T proto.Message](m *encoded, err error, msg T) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	defer m.pieces.Free() // as grpc would once sent: a pooled page goes back
	if err := proto.Unmarshal(m.pieces.Materialize(), msg); err != nil {
		return zero, status.Errorf(codes.Internal, "decode the %T just encoded: %v", msg, err)
	}
	return msg, nil
}

// Field numbers of the responses (api/proto); TestEncodedMatchesProto holds
// them to the generated code.
const (
	watchType            protowire.Number = 1
	watchObject          protowire.Number = 2
	watchResourceVersion protowire.Number = 3

	listObjects         protowire.Number = 1
	listResourceVersion protowire.Number = 2
	listContinueToken   protowire.Number = 3

	getObject protowire.Number = 1
)

// The responses are encoded with a message's own fields first, in one
// buffer, and each object's JSON, shared, after its other fields: protobuf
// parsers accept fields in any order, so a one-object message is two
// pieces, the JSON last.

// watchEvent encodes a WatchResponse; o may be nil. It fails only on a
// cold object whose stored bytes are damaged (object.ErrDamaged).
func watchEvent(typ pb.EventType, o *object.Object, rv string) (*encoded, error) {
	var json []byte
	if o != nil {
		var err error
		if json, err = o.Bytes(); err != nil {
			return nil, err
		}
	}
	n := stringSize(watchResourceVersion, rv)
	if typ != 0 {
		n += protowire.SizeTag(watchType) + protowire.SizeVarint(uint64(typ))
	}
	if o != nil {
		n += objectSize(watchObject, o)
	}
	b := make([]byte, 0, n)
	if typ != 0 {
		b = protowire.AppendTag(b, watchType, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(typ))
	}
	b = appendString(b, watchResourceVersion, rv)
	m := newEncoded()
	if o == nil {
		m.add(b)
		return m, nil
	}
	m.add(appendObject(b, watchObject, o))
	m.add(json)
	return m, nil
}

// getResponse encodes a GetResponse, or fails as watchEvent does.
func getResponse(o *object.Object) (*encoded, error) {
	json, err := o.Bytes()
	if err != nil {
		return nil, err
	}
	m := newEncoded()
	m.add(appendObject(make([]byte, 0, objectSize(getObject, o)), getObject, o))
	m.add(json)
	return m, nil
}

// listPage encodes a ListResponse, or fails as watchEvent does. A hot
// object's JSON is shared; the page's cold objects are decompressed into
// one pooled buffer that grpc gives back once the page is written
// (pageJSON).
func listPage(objs []*object.Object, rv, token string) (*encoded, error) {
	n := stringSize(listResourceVersion, rv) + stringSize(listContinueToken, token)
	for _, o := range objs {
		n += objectSize(listObjects, o)
	}
	jsons, err := pageJSON(objs, coldPages)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, n)
	b = appendString(b, listResourceVersion, rv)
	b = appendString(b, listContinueToken, token)
	m := &encoded{pieces: make(mem.BufferSlice, 0, 2*len(objs)+1)}
	from := 0 // where b's bytes not yet in a piece start
	for i, o := range objs {
		b = appendObject(b, listObjects, o)
		m.add(b[from:len(b):len(b)])
		m.pieces = append(m.pieces, jsons[i])
		from = len(b)
	}
	m.add(b[from:])
	return m, nil
}

// objectSize is the size of field num holding o, but o's JSON.
func objectSize(num protowire.Number, o *object.Object) int {
	size := o.WireSize()
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(size)) + size - o.Len()
}

// appendObject appends field num holding o, but o's JSON, which must follow.
func appendObject(b []byte, num protowire.Number, o *object.Object) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(o.WireSize()))
	return o.AppendWireHeader(b)
}

// stringSize is the size of string field num holding s; proto3 omits "".
func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
