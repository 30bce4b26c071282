package kubeproto

import (
	"bytes"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// List returns a list of kind listGVK (such as v1 PodList or meta.k8s.io/v1
// PartialObjectMetadataList) as the API server writes it: the magic, then a
// runtime.Unknown whose Raw is the typed list's message, made of lm and
// items, messages from Message or PartialMessage, in order. The items are
// copied, not decoded.
func List(listGVK schema.GroupVersionKind, lm metav1.ListMeta, items [][]byte) []byte {
	l := newList(listGVK, lm, items)
	var buf bytes.Buffer
	buf.Grow(l.header.size())
	_, _ = l.writeTo(&buf) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// WriteList writes what List returns to w without first joining the items
// into one buffer, for a large list. It makes a few small writes per item,
// so w should be buffered. It returns the bytes written and w's error.
func WriteList(w io.Writer, listGVK schema.GroupVersionKind, lm metav1.ListMeta, items [][]byte) (int64, error) {
	return newList(listGVK, lm, items).writeTo(w)
}

// list is a typed list's message, the Raw of its runtime.Unknown. Every
// built-in list has ListMeta as field 1 and items as field 2, written in
// that order; the odd one is meta.k8s.io/v1beta1 PartialObjectMetadataList,
// whose items are field 1 and come first.
type list struct {
	header               unknownHeader
	meta                 []byte
	items                [][]byte
	metaField, itemField protowire.Number
}

var v1beta1PartialList = metav1beta1.SchemeGroupVersion.WithKind("PartialObjectMetadataList")

func newList(listGVK schema.GroupVersionKind, lm metav1.ListMeta, items [][]byte) list {
	meta, err := lm.Marshal()
	if err != nil {
		// The generated code of ListMeta has no failing path.
		panic("kubeproto: encode ListMeta: " + err.Error())
	}
	l := list{meta: meta, items: items, metaField: 1, itemField: 2}
	if listGVK == v1beta1PartialList {
		l.metaField, l.itemField = 2, 1
	}
	l.header = newUnknownHeader(listGVK, l.bodySize())
	return l
}

func (l list) bodySize() int {
	n := protowire.SizeTag(l.metaField) + protowire.SizeBytes(len(l.meta))
	for _, item := range l.items {
		n += protowire.SizeTag(l.itemField) + protowire.SizeBytes(len(item))
	}
	return n
}

func (l list) writeTo(w io.Writer) (int64, error) {
	ew := errWriter{w: w}
	scratch := make([]byte, 0, 64)
	ew.write(l.header.appendPrefix(scratch))
	if l.metaField < l.itemField {
		ew.field(scratch, l.metaField, l.meta)
	}
	for _, item := range l.items {
		ew.field(scratch, l.itemField, item)
	}
	if l.metaField > l.itemField {
		ew.field(scratch, l.metaField, l.meta)
	}
	ew.write(unknownSuffix)
	return ew.n, ew.err
}

// errWriter keeps the first error of a series of writes and counts bytes.
type errWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (ew *errWriter) write(b []byte) {
	if ew.err != nil {
		return
	}
	n, err := ew.w.Write(b)
	ew.n += int64(n)
	ew.err = err
}

// field writes a length-delimited field: its tag and length from scratch, then value.
func (ew *errWriter) field(scratch []byte, num protowire.Number, value []byte) {
	h := protowire.AppendTag(scratch[:0], num, protowire.BytesType)
	ew.write(protowire.AppendVarint(h, uint64(len(value))))
	ew.write(value)
}
