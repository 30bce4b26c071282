package object

import (
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerd/informerd/internal/benchdata"
)

func benchPodsJSON(b *testing.B) [][]byte {
	out := make([][]byte, 100)
	for i := range out {
		data, err := json.Marshal(benchdata.Pod(i, 10, uint64(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = data
	}
	return out
}

// BenchmarkEncode measures turning one pod's JSON, as a watch event carries
// it (managedFields included), into its cached form: metadata scan,
// transform, two index values, wire encoding.
func BenchmarkEncode(b *testing.B) {
	enc, err := NewEncoder([]IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}, {Name: "app", Label: "app"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	pods := benchPodsJSON(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r, err := ParseRaw(slices.Clone(pods[i%len(pods)]))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := enc.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeViaUnstructured is the same work done the way a dynamic
// informer would: decode into unstructured, strip, encode JSON again. It
// is the cost Encode replaces.
func BenchmarkEncodeViaUnstructured(b *testing.B) {
	enc, err := NewEncoder([]IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}, {Name: "app", Label: "app"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	pods := benchPodsJSON(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
		if _, err := enc.EncodeUnstructured(u); err != nil {
			b.Fatal(err)
		}
	}
}
