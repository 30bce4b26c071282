package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// listByIndex is scenario 4: "the pods on my node", from informerd's List
// by index and from kube-apiserver's list with a field selector.
func listByIndex(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "list",
		Title:   "4. List by index",
		Plot:    "p50 ms",
		Columns: []string{"p50 ms", "p99 ms", "server CPU-s per 1k lists", "pods per list"},
	}
	t := newTable()
	for run := range b.runs {
		variants := []struct {
			name string
			pid  int
			list func(node string) (int, error)
		}{
			{"informerd List by index", b.informerd.pid, func(node string) (int, error) {
				resp, err := b.informerd.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: 5000,
					Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{node}}}})
				return len(resp.GetObjects()), err
			}},
			{"kube-apiserver list, fieldSelector", b.cluster.apiPID, func(node string) (int, error) {
				raw, err := b.cluster.kube.CoreV1().RESTClient().Get().Namespace(b.ns).Resource("pods").
					Param("fieldSelector", "spec.nodeName="+node).DoRaw(ctx)
				// Count items without decoding them all: one uid per pod.
				return countUIDs(raw), err
			}},
		}
		for _, v := range variants {
			var lat []float64
			pods := 0
			m := meterCPU(v.pid)
			for i := range b.lists {
				start := time.Now()
				n, err := v.list(nodeName(i, b.nodes))
				if err != nil {
					return s, fmt.Errorf("%s: %w", v.name, err)
				}
				lat = append(lat, float64(time.Since(start))/float64(time.Millisecond))
				pods += n
			}
			cpu, _ := m.stop()
			slices.Sort(lat)
			labels := []Label{{"variant", v.name}}
			t.add(labels, "p50 ms", lat[len(lat)/2])
			t.add(labels, "p99 ms", lat[min(len(lat)-1, len(lat)*99/100)])
			t.add(labels, "server CPU-s per 1k lists", 1000*cpu[0]/float64(b.lists))
			t.add(labels, "pods per list", float64(pods)/float64(b.lists))
		}
		logf("run %d, list by index measured", run+1)
	}
	s.Rows = t.rows()
	inf, ok1 := s.find("p50 ms", Label{"variant", "informerd List by index"})
	api, ok2 := s.find("p50 ms", Label{"variant", "kube-apiserver list, fieldSelector"})
	if ok1 && ok2 {
		s.Notes = append(s.Notes, fmt.Sprintf("informerd's median latency is %.2f× kube-apiserver's.", inf/api))
	}
	s.Notes = append(s.Notes, fmt.Sprintf("%d sequential lists, node i mod %d, of %d pods over %d nodes; kube-apiserver answers from its watch cache (no etcd read); latency includes the client's receipt of the bytes, not their decoding.", b.lists, b.nodes, b.pods, b.nodes))
	return s, nil
}

// countUIDs counts `"uid":` in a JSON list: one per pod (owner references
// of benchmark pods carry "uid" too, so it is halved).
func countUIDs(raw []byte) int {
	n := 0
	for i := 0; i+6 <= len(raw); i++ {
		if string(raw[i:i+6]) == `"uid":` {
			n++
		}
	}
	return n / 2
}
