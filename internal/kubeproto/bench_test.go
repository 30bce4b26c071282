package kubeproto_test

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/kubeproto"
)

var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

func benchPodJSON(b *testing.B) []byte {
	js, err := json.Marshal(benchdata.Pod(1, 10, 4711))
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// BenchmarkMessage is the cost of one object's protobuf, transcoded from
// its JSON; BenchmarkMessageTyped the same by the typed path: JSON decoded
// into the typed Pod, then the generated Marshal.
func BenchmarkMessage(b *testing.B) {
	benchMessage(b, kubeproto.Message)
}

func BenchmarkMessageTyped(b *testing.B) {
	benchMessage(b, kubeproto.MessageTyped)
}

// BenchmarkMessageCold is BenchmarkMessage with the CPU's own caches
// emptied before each object (the timer stopped meanwhile), as they are
// in place: between two events of a watched resource a thousand watch
// handlers run and evict the transcoder's plans, code and input. The
// untimed reads make it take about 20 s of wall time at -benchtime=1s.
func BenchmarkMessageCold(b *testing.B) {
	js := benchPodJSON(b)
	evict := make([]byte, 32<<20) // past L2 and most of L3 on the machine informerd is measured on
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	var sum byte
	for b.Loop() {
		b.StopTimer()
		// Reads, not writes: no dirty line is written back during the
		// timed part.
		for i := 0; i < len(evict); i += 64 {
			sum += evict[i]
		}
		b.StartTimer()
		if _, err := kubeproto.Message(podGVK, js); err != nil {
			b.Fatal(err)
		}
	}
	evictSink = sum
}

// evictSink keeps BenchmarkMessageCold's reads from being optimized away.
var evictSink byte

func benchMessage(b *testing.B, message func(schema.GroupVersionKind, []byte) ([]byte, error)) {
	js := benchPodJSON(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := message(podGVK, js); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPartialMessage(b *testing.B) {
	js := benchPodJSON(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kubeproto.PartialMessage(js); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList is the cost of a 500-item list from messages already made.
func BenchmarkList(b *testing.B) {
	msg, err := kubeproto.Message(podGVK, benchPodJSON(b))
	if err != nil {
		b.Fatal(err)
	}
	items := make([][]byte, 500)
	for i := range items {
		items[i] = msg
	}
	lm := metav1.ListMeta{ResourceVersion: "4711"}
	listGVK := podGVK.GroupVersion().WithKind("PodList")
	b.ReportAllocs()
	for b.Loop() {
		_ = kubeproto.List(listGVK, lm, items)
	}
}
