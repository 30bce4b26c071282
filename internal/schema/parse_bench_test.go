package schema_test

import (
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/informerd/informerd/internal/schema"
)

// BenchmarkParse parses the API server's core/v1 document (1.6 MB), what
// the first field mask on a Pod waits for, after its download.
func BenchmarkParse(b *testing.B) {
	paths, err := discovery.NewDiscoveryClientForConfigOrDie(env.Config).OpenAPIV3().Paths()
	if err != nil {
		b.Fatal(err)
	}
	data, err := paths["api/v1"].Schema("application/json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
