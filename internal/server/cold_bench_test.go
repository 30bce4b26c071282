package server_test

import (
	"context"
	"testing"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/object"
)

// BenchmarkListCold is BenchmarkList over a cache whose objects are cold
// (--cache-compression=cold): the page's JSON is decompressed once per
// object per call. Compare with BenchmarkList.
func BenchmarkListCold(b *testing.B) {
	const pods = 500
	// A history of one event: every pod but the last changed is cold.
	bs := newBenchServerConfig(b, `{history: {maxEvents: 1}, resources: [{resource: pods, indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]}]}`, pods, 100)
	for i := range pods {
		bs.update(i, uint64(1001+i))
	}
	codec := object.NewCodec(object.CodecOptions{})
	var samples [][]byte
	for _, o := range bs.ix.Sample(256) {
		data, err := o.Bytes()
		if err != nil {
			b.Fatal(err)
		}
		samples = append(samples, data)
	}
	if err := codec.Train(samples); err != nil {
		b.Fatal(err)
	}
	if step := bs.ix.Cool(codec, pods); step.Cooled < pods-1 {
		b.Fatalf("cooled %d of %d pods", step.Cooled, pods)
	}
	ctx := context.Background()
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := bs.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: pods}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
