package object

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/informerd/informerd/internal/benchdata"
)

// coldPods encodes n realistic pods (managedFields stripped or kept),
// trains a codec on 256 of them spread over the set, as the cooling loop
// does, and returns the hot objects and their cold copies.
func coldPods(b *testing.B, n int, strip bool) (hot, cold []*Object) {
	b.Helper()
	enc, err := NewEncoder([]IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, strip)
	if err != nil {
		b.Fatal(err)
	}
	hot = make([]*Object, n)
	for i := range hot {
		data, err := json.Marshal(benchdata.Pod(i, 100, uint64(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		r, err := ParseRaw(data)
		if err != nil {
			b.Fatal(err)
		}
		if hot[i], err = enc.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
	c := NewCodec(CodecOptions{})
	var samples [][]byte
	for i := 0; i < n; i += max(1, n/256) {
		samples = append(samples, hot[i].data)
	}
	if err := c.Train(samples); err != nil {
		b.Fatal(err)
	}
	cold = make([]*Object, n)
	for i, o := range hot {
		if cold[i], err = c.Compress(o); err != nil {
			b.Fatal(err)
		}
	}
	return hot, cold
}

func managedFieldsCase(strip bool) string {
	if strip {
		return "managedFields=stripped"
	}
	return "managedFields=kept"
}

// BenchmarkColdRead measures what a List or Get pays per cold object: its
// JSON decompressed onto a reused buffer. The stored and JSON bytes per
// object are reported, so one run gives both sides of the trade-off.
func BenchmarkColdRead(b *testing.B) {
	for _, strip := range []bool{true, false} {
		b.Run(managedFieldsCase(strip), func(b *testing.B) {
			hot, cold := coldPods(b, 10000, strip)
			var raw, stored int
			for i := range cold {
				raw += hot[i].Len()
				stored += cold[i].StoredLen()
			}
			var buf []byte
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				var err error
				if buf, err = cold[i%len(cold)].AppendBytes(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(raw)/float64(len(cold)), "json-B/object")
			b.ReportMetric(float64(stored)/float64(len(cold)), "stored-B/object")
			b.ReportMetric(float64(raw)/float64(stored), "ratio")
		})
	}
}

// BenchmarkCompress measures the cooling loop's cost per object: one pod
// compressed with the resource's dictionary.
func BenchmarkCompress(b *testing.B) {
	for _, strip := range []bool{true, false} {
		b.Run(managedFieldsCase(strip), func(b *testing.B) {
			hot, _ := coldPods(b, 1000, strip)
			c := NewCodec(CodecOptions{})
			var samples [][]byte
			for _, o := range hot[:256] {
				samples = append(samples, o.data)
			}
			if err := c.Train(samples); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := c.Compress(hot[i%len(hot)]); err != nil {
					b.Fatal(fmt.Errorf("compress: %w", err))
				}
			}
		})
	}
}
