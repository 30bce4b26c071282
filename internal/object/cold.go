package object

import (
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// ErrDamaged: a cold object's stored bytes do not decompress to the JSON
// they were made from (a frame that does not parse, a wrong dictionary, a
// length or checksum that does not match). Its bytes are never served.
var ErrDamaged = errors.New("object: stored bytes damaged")

// Bytes returns the object's JSON: the cached bytes themselves when the
// object is hot, which the caller must not modify; new memory when it is
// cold. A cold object whose stored bytes are damaged returns an error that
// wraps ErrDamaged, and is reported to its Codec (OnDamage).
func (o *Object) Bytes() ([]byte, error) {
	if o.dict == nil {
		return o.data, nil
	}
	return o.appendCold(nil)
}

// AppendBytes appends the object's JSON to dst, as Bytes returns it. On
// error dst is returned as it was.
func (o *Object) AppendBytes(dst []byte) ([]byte, error) {
	if o.dict == nil {
		return append(dst, o.data...), nil
	}
	return o.appendCold(dst)
}

// Len is the length of the object's JSON, without decompressing it.
func (o *Object) Len() int {
	if o.dict == nil {
		return len(o.data)
	}
	return int(o.rawLen)
}

// StoredLen is how many bytes the object's JSON takes in memory: Len when
// hot, the compressed frame's length when cold.
func (o *Object) StoredLen() int { return len(o.data) }

// Cold reports whether the object's JSON is held compressed.
func (o *Object) Cold() bool { return o.dict != nil }

// Dict is the dictionary a cold object was compressed with; nil when hot.
func (o *Object) Dict() *Dict { return o.dict }

// WithJSON returns a hot copy of o that holds json instead of o's bytes:
// a projection of o, or an object built by a test. json is kept, not
// copied.
func (o *Object) WithJSON(json []byte) *Object {
	c := *o
	c.data, c.dict, c.rawLen = json, nil, 0
	return &c
}

// Hot returns o when it is hot, else a hot copy of it (its JSON
// decompressed, in new memory).
func (o *Object) Hot() (*Object, error) {
	if o.dict == nil {
		return o, nil
	}
	b, err := o.Bytes()
	if err != nil {
		return nil, err
	}
	return o.WithJSON(b), nil
}

// checksumFlag is the Content_Checksum_flag of a zstd frame header's
// descriptor (RFC 8878, 3.1.1.1.1): every cold frame carries the
// checksum of its content.
const checksumFlag = 1 << 2

// appendCold decompresses the object's frame onto dst. Every check that
// could let damaged bytes through is made: the frame's header (checksum
// present, this dictionary, the content size recorded at compression),
// the decoder's own checks and its content checksum, and the length.
func (o *Object) appendCold(dst []byte) ([]byte, error) {
	d := o.dict
	var h zstd.Header
	if err := h.Decode(o.data); err != nil {
		return dst, o.damaged(fmt.Errorf("frame header: %w", err))
	}
	switch {
	case len(o.data) < 5 || o.data[4]&checksumFlag == 0 || !h.HasCheckSum:
		return dst, o.damaged(errors.New("frame without a checksum"))
	case h.DictionaryID != d.id:
		return dst, o.damaged(fmt.Errorf("frame of dictionary %d, want %d", h.DictionaryID, d.id))
	case !h.HasFCS || h.FrameContentSize != uint64(o.rawLen):
		return dst, o.damaged(fmt.Errorf("frame of %d bytes, want %d", h.FrameContentSize, o.rawLen))
	}
	if o.rawLen > maxDecoded {
		return dst, o.damaged(fmt.Errorf("frame of %d bytes, more than a cold object holds", o.rawLen))
	}
	// Room for the JSON is made only now that the header agrees with
	// rawLen: a damaged rawLen must not allocate gigabytes.
	out, err := d.dec.DecodeAll(o.data, slices.Grow(dst, int(o.rawLen)))
	if err != nil {
		return dst, o.damaged(err)
	}
	if n := len(out) - len(dst); n != int(o.rawLen) {
		return dst, o.damaged(fmt.Errorf("decompressed %d bytes, want %d", n, o.rawLen))
	}
	return out, nil
}

// damaged reports the object to its codec and returns the error a reader
// gets.
func (o *Object) damaged(cause error) error {
	err := fmt.Errorf("%w: %s at resourceVersion %s: %v", ErrDamaged, o.Key, o.ResourceVersion, cause)
	if c := o.dict.codec; c != nil {
		c.reportDamage(o, err)
	}
	return err
}

// Dict is one resource's compression dictionary: raw content (samples of
// the resource's own objects) that a cold object's frame refers to, and
// the decoder that reads such frames. Every object compressed with it
// keeps it alive. Its methods may be called concurrently.
type Dict struct {
	id      uint32
	content []byte
	dec     *zstd.Decoder
	codec   *Codec // told of damaged objects; nil in tests of the form alone
}

// ID is the dictionary's number within its codec, written in each frame.
func (d *Dict) ID() uint32 { return d.id }

// Len is the dictionary's content length.
func (d *Dict) Len() int { return len(d.content) }
