package deltafifo

import (
	"context"
	"strconv"
	"testing"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/object"
)

// BenchmarkReplaceDiff diffs a relist of 10,000 pods of which 1% changed,
// 1% are new and 1% vanished against a cache of 10,000.
func BenchmarkReplaceDiff(b *testing.B) {
	const n = 10000
	enc, err := object.NewEncoder(nil, true)
	if err != nil {
		b.Fatal(err)
	}
	known := fakeKnown{}
	var list []*object.Object
	for i := range n {
		o, err := enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(i, 100, uint64(i+1))))
		if err != nil {
			b.Fatal(err)
		}
		if i >= n/100 { // the first 1% vanished from the list
			list = append(list, o)
		}
		known[o.Key] = o
	}
	for i := n / 100; i < 2*n/100; i++ { // 1% changed
		c := *list[i]
		c.ResourceVersion = strconv.Itoa(n + i)
		list[i] = &c
	}
	for i := range n / 100 { // 1% new
		o, err := enc.EncodeUnstructured(benchdata.Unstructured(benchdata.Pod(n+i, 100, uint64(2*n+i))))
		if err != nil {
			b.Fatal(err)
		}
		list = append(list, o)
	}
	f := New(known, 1)
	f.synced = true
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Replace(list, "99999"); err != nil {
			b.Fatal(err)
		}
		ds, err := f.Pop(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if want := 3*n/100 + 1; len(ds) != want {
			b.Fatalf("got %d deltas, want %d", len(ds), want)
		}
	}
}
