package object

import (
	"testing"

	"github.com/informerd/informerd/internal/benchdata"
)

// BenchmarkEncode measures turning one decoded Pod into its cached form:
// transform, two index values, JSON encoding.
func BenchmarkEncode(b *testing.B) {
	enc, err := NewEncoder([]IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}, {Name: "app", Label: "app"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]any, 100)
	for i := range pods {
		pods[i] = benchdata.Pod(i, 10, uint64(i+1))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		u := benchdata.Unstructured(pods[i%len(pods)])
		b.StartTimer()
		if _, err := enc.Encode(u); err != nil {
			b.Fatal(err)
		}
	}
}
