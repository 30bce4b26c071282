package kubeproto

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFieldsV1 compares the transcoder's rule for metav1.FieldsV1 with
// FieldsV1's own UnmarshalJSON and Marshal, framed as a field, for the
// values that reach it: null too, which only a field set that is not a
// pointer (none in today's types) or an element of a slice would pass.
func TestFieldsV1(t *testing.T) {
	f := &field{tag: protowire.AppendTag(nil, 7, protowire.BytesType)}
	for _, raw := range []string{`null`, `{}`, `{"f:a":{".":{}}}`, `{ "f:a" : { } }`, `"s"`, `[1]`} {
		var v metav1.FieldsV1
		if err := v.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		m, err := v.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		want := protowire.AppendBytes(bytes.Clone(f.tag), m)
		x := &transcoder{}
		x.fieldsV1(f, []byte(raw))
		if !bytes.Equal(x.buf, want) {
			t.Errorf("%s: wrote %q, FieldsV1 marshals %q", raw, x.buf, want)
		}
	}
}
