package object

import (
	"unsafe"

	"github.com/buger/jsonparser"
)

// managedFieldsSpan finds metadata.managedFields in an object's JSON in one
// scan and returns the span to cut, [start, end): the member with its
// key and one separating comma, as jsonparser.Delete removes it. ok is
// false when the object has no such member.
func managedFieldsSpan(data []byte) (start, end int, ok bool) {
	var value []byte
	jsonparser.EachKey(data, func(_ int, v []byte, _ jsonparser.ValueType, err error) {
		if err == nil {
			value = v
		}
	}, []string{"metadata", "managedFields"})
	if value == nil {
		return 0, 0, false
	}
	// value is within data; its offset is the distance between them.
	vStart := int(uintptr(unsafe.Pointer(unsafe.SliceData(value))) - uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	if vStart < 0 || vStart+len(value) > len(data) {
		return 0, 0, false
	}
	vEnd := vStart + len(value)
	// Back from the value over ':' and whitespace to the key's closing
	// quote, then to its opening quote (the key has no escapes).
	i := skipSpaceBack(data, vStart-1)
	if i < 0 || data[i] != ':' {
		return 0, 0, false
	}
	i = skipSpaceBack(data, i-1)
	const key = `"managedFields"`
	if i+1 < len(key) || string(data[i+1-len(key):i+1]) != key {
		return 0, 0, false
	}
	kStart := i + 1 - len(key)
	// The comma before the key, if any; else the one after the value.
	before := skipSpaceBack(data, kStart-1)
	if before >= 0 && data[before] == ',' {
		return before, vEnd, true
	}
	after := skipSpace(data, vEnd)
	if after < len(data) && data[after] == ',' {
		return kStart, skipSpace(data, after+1), true
	}
	return kStart, vEnd, true // the only member
}

func skipSpaceBack(data []byte, i int) int {
	for i >= 0 && isSpace(data[i]) {
		i--
	}
	return i
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
