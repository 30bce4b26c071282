package projection

import (
	"encoding/json"
	"testing"

	"github.com/informerd/informerd/internal/benchdata"
)

// BenchmarkProject projects the bench pod (managedFields included) to what
// a routing sidecar needs: name, labels and IP.
func BenchmarkProject(b *testing.B) {
	data, err := json.Marshal(benchdata.Pod(7, 100, 12345))
	if err != nil {
		b.Fatal(err)
	}
	m, err := Compile([]string{"metadata.name", "metadata.labels", "status.podIP"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		if out, err = m.Project(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out)), "bytes-out")
}
