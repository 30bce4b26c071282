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

// appendWire appends the informerd.v1.Object message for the given fields
// in protobuf wire form, the JSON last. It returns the message and where
// each field's value starts within it: namespace, name, uid,
// resource_version and json, in that order.
func appendWire(b []byte, namespace, name, uid, rv string, json []byte) ([]byte, [5]int) {
	var at [5]int
	for i, f := range []struct {
		num protowire.Number
		s   string
	}{{fieldNamespace, namespace}, {fieldName, name}, {fieldUID, uid}, {fieldResourceVersion, rv}} {
		if f.s != "" {
			b = protowire.AppendTag(b, f.num, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(len(f.s)))
			at[i] = len(b)
			b = append(b, f.s...)
		}
	}
	if len(json) > 0 {
		b = protowire.AppendTag(b, fieldJSON, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(json)))
	}
	at[4] = len(b)
	return append(b, json...), at
}

// wireSize is the size appendWire's message will have.
func wireSize(namespace, name, uid, rv string, jsonLen int) int {
	n := 0
	for _, s := range []string{namespace, name, uid, rv} {
		if s != "" {
			n += 1 + protowire.SizeBytes(len(s))
		}
	}
	if jsonLen > 0 {
		n += 1 + protowire.SizeBytes(jsonLen)
	}
	return n
}

// Wire returns the object as an informerd.v1.Object message in protobuf
// wire form: the bytes every response that carries the object embeds, so
// they are encoded once per object, not once per client. Objects built by
// an Encoder carry it; for others (tests) it is encoded on each call.
func (o *Object) Wire() []byte {
	if o.Proto != nil {
		return o.Proto
	}
	b, _ := appendWire(nil, o.Namespace, o.Name, o.UID, o.ResourceVersion, o.JSON)
	return b
}
