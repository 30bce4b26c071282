package kubeproto

import (
	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// magic starts every protobuf body the API server writes for an object or a
// list (protobuf.Serializer); watch frames carry it on their embedded object.
var magic = []byte("k8s\x00")

// Field numbers of runtime.Unknown and runtime.TypeMeta (k8s.io/apimachinery/pkg/runtime/generated.proto).
const (
	unknownTypeMeta        protowire.Number = 1
	unknownRaw             protowire.Number = 2
	unknownContentEncoding protowire.Number = 3
	unknownContentType     protowire.Number = 4

	typeMetaAPIVersion protowire.Number = 1
	typeMetaKind       protowire.Number = 2
)

// statusGVK is how the API server names a metav1.Status in every group: it
// is registered unversioned, as v1.
var statusGVK = schema.GroupVersionKind{Version: "v1", Kind: "Status"}

// Object returns msg, a message from Message or PartialMessage, as the API
// server writes an object of gvk: the magic, then a runtime.Unknown whose
// TypeMeta names gvk and whose Raw is msg.
func Object(gvk schema.GroupVersionKind, msg []byte) []byte {
	h := newUnknownHeader(gvk, len(msg))
	b := make([]byte, 0, h.size())
	b = h.appendPrefix(b)
	b = append(b, msg...)
	return append(b, unknownSuffix...)
}

// Status returns st as the API server writes an error response, or the
// object of an ERROR watch event, in protobuf.
func Status(st *metav1.Status) []byte {
	msg, err := st.Marshal()
	if err != nil {
		// The generated code of Status and its fields has no failing path.
		panic("kubeproto: encode Status: " + err.Error())
	}
	return Object(statusGVK, msg)
}

// unknownHeader is the part of a runtime.Unknown before its Raw bytes:
// runtime.Unknown.NestedMarshalTo writes TypeMeta, then Raw (always, even
// empty), then ContentEncoding and ContentType (always, empty).
type unknownHeader struct {
	apiVersion, kind string
	rawLen           int
}

func newUnknownHeader(gvk schema.GroupVersionKind, rawLen int) unknownHeader {
	return unknownHeader{apiVersion: gvk.GroupVersion().String(), kind: gvk.Kind, rawLen: rawLen}
}

func (h unknownHeader) typeMetaLen() int {
	return protowire.SizeTag(typeMetaAPIVersion) + protowire.SizeBytes(len(h.apiVersion)) +
		protowire.SizeTag(typeMetaKind) + protowire.SizeBytes(len(h.kind))
}

// size is the whole encoding's length: magic, header, Raw and suffix.
func (h unknownHeader) size() int {
	return len(magic) +
		protowire.SizeTag(unknownTypeMeta) + protowire.SizeBytes(h.typeMetaLen()) +
		protowire.SizeTag(unknownRaw) + protowire.SizeBytes(h.rawLen) +
		len(unknownSuffix)
}

// appendPrefix appends the magic and the Unknown up to the Raw bytes.
func (h unknownHeader) appendPrefix(b []byte) []byte {
	b = append(b, magic...)
	b = protowire.AppendTag(b, unknownTypeMeta, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(h.typeMetaLen()))
	b = protowire.AppendTag(b, typeMetaAPIVersion, protowire.BytesType)
	b = protowire.AppendString(b, h.apiVersion)
	b = protowire.AppendTag(b, typeMetaKind, protowire.BytesType)
	b = protowire.AppendString(b, h.kind)
	b = protowire.AppendTag(b, unknownRaw, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(h.rawLen))
}

// unknownSuffix is the empty ContentEncoding and ContentType after Raw.
var unknownSuffix = func() []byte {
	b := protowire.AppendTag(nil, unknownContentEncoding, protowire.BytesType)
	b = protowire.AppendString(b, "")
	b = protowire.AppendTag(b, unknownContentType, protowire.BytesType)
	return protowire.AppendString(b, "")
}()
