package object

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of informerd.v1.Object (api/proto); TestWireMatchesProto
// holds them to the generated code.
const (
	fieldNamespace       = 1
	fieldName            = 2
	fieldUID             = 3
	fieldResourceVersion = 4
	fieldJSON            = 5
)

// AppendWireHeader appends the start of the object's informerd.v1.Object
// message in protobuf wire form: every field, and the JSON field's tag and
// length, but not the JSON bytes, which end the message. A response embeds
// the object as this header followed by its JSON (Bytes), shared by every
// response and never copied when hot; WireSize is the length of the two
// together.
func (o *Object) AppendWireHeader(b []byte) []byte {
	for _, f := range []struct {
		num protowire.Number
		s   string
	}{{fieldNamespace, o.Namespace}, {fieldName, o.Name}, {fieldUID, o.UID}, {fieldResourceVersion, o.ResourceVersion}} {
		if f.s != "" {
			b = protowire.AppendTag(b, f.num, protowire.BytesType)
			b = protowire.AppendString(b, f.s)
		}
	}
	if n := o.Len(); n > 0 {
		b = protowire.AppendTag(b, fieldJSON, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
	}
	return b
}

// WireSize is the length of the object's informerd.v1.Object message.
func (o *Object) WireSize() int {
	n := 0
	for _, s := range []string{o.Namespace, o.Name, o.UID, o.ResourceVersion} {
		if s != "" {
			n += 1 + protowire.SizeBytes(len(s))
		}
	}
	if l := o.Len(); l > 0 {
		n += 1 + protowire.SizeBytes(l)
	}
	return n
}

// Wire returns the object's informerd.v1.Object message in protobuf wire
// form, in new memory, or the error Bytes returns.
func (o *Object) Wire() ([]byte, error) {
	b := make([]byte, 0, o.WireSize())
	return o.AppendBytes(o.AppendWireHeader(b))
}
