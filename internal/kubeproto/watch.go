package kubeproto

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of metav1.WatchEvent and runtime.RawExtension.
const (
	watchEventType   protowire.Number = 1
	watchEventObject protowire.Number = 2
	rawExtensionRaw  protowire.Number = 1
)

// WatchFrame returns one event of a protobuf watch as the API server frames
// it: a 4-byte big-endian length, then a metav1.WatchEvent without magic or
// envelope (the stream's serializer is protobuf.RawSerializer) whose
// Object.Raw is obj, the event's object from Object, or Status for an ERROR
// event. eventType is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
func WatchFrame(eventType string, obj []byte) []byte {
	b := AppendWatchFrameHeader(nil, eventType, obj)
	return append(b, obj...)
}

// AppendWatchFrameHeader appends to b what WatchFrame puts before obj, so
// that a writer can send a shared obj without copying it into each frame.
// obj nil is an event without an object.
func AppendWatchFrameHeader(b []byte, eventType string, obj []byte) []byte {
	rawExt := 0
	if obj != nil {
		rawExt = protowire.SizeTag(rawExtensionRaw) + protowire.SizeBytes(len(obj))
	}
	event := protowire.SizeTag(watchEventType) + protowire.SizeBytes(len(eventType)) +
		protowire.SizeTag(watchEventObject) + protowire.SizeBytes(rawExt)

	b = binary.BigEndian.AppendUint32(b, uint32(event))
	b = protowire.AppendTag(b, watchEventType, protowire.BytesType)
	b = protowire.AppendString(b, eventType)
	b = protowire.AppendTag(b, watchEventObject, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(rawExt))
	if obj != nil {
		b = protowire.AppendTag(b, rawExtensionRaw, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(obj)))
	}
	return b
}
