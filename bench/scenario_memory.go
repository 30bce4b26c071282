package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// memory is scenario 2: heap and RSS per cached pod, informerd against a
// client-go SharedIndexInformer holding the same pods, with and without
// managedFields, against the pods' JSON size.
func memory(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "memory",
		Title:   "2. Memory per cached pod",
		Plot:    "heap bytes/pod",
		Columns: []string{"heap bytes/pod", "RSS bytes/pod", "JSON bytes/pod"},
	}
	t := newTable()
	empty := "mem-empty"
	if err := b.cluster.loadPods(ctx, empty, 0, 1); err != nil {
		return s, err
	}
	for _, size := range b.memorySizes {
		ns := fmt.Sprintf("mem-%d", size)
		if err := b.cluster.loadPods(ctx, ns, size, b.nodes); err != nil {
			return s, err
		}
		jsonBytes, err := listJSONBytes(ctx, b, ns)
		if err != nil {
			return s, err
		}
		for run := range b.runs {
			// informerd, minus an informerd caching an empty namespace.
			heap, rss, err := daemonMemory(ctx, b, ns)
			if err != nil {
				return s, err
			}
			baseHeap, baseRSS, err := daemonMemory(ctx, b, empty)
			if err != nil {
				return s, err
			}
			labels := []Label{{"cache", "informerd (managedFields stripped)"}, {"pods", strconv.Itoa(size)}}
			t.add(labels, "heap bytes/pod", (heap-baseHeap)/float64(size))
			t.add(labels, "RSS bytes/pod", (rss-baseRSS)/float64(size))
			t.add(labels, "JSON bytes/pod", jsonBytes/float64(size))
			for _, strip := range []bool{true, false} {
				heap, rss, err := informerMemory(b, ns, strip)
				if err != nil {
					return s, err
				}
				baseHeap, baseRSS, err := informerMemory(b, empty, strip)
				if err != nil {
					return s, err
				}
				name := "client-go informer"
				if strip {
					name += " (managedFields stripped)"
				}
				labels := []Label{{"cache", name}, {"pods", strconv.Itoa(size)}}
				t.add(labels, "heap bytes/pod", (heap-baseHeap)/float64(size))
				t.add(labels, "RSS bytes/pod", (rss-baseRSS)/float64(size))
				t.add(labels, "JSON bytes/pod", jsonBytes/float64(size))
			}
			logf("run %d, memory of %d pods measured", run+1, size)
		}
	}
	s.Rows = t.rows()
	for _, size := range b.memorySizes {
		n := strconv.Itoa(size)
		inf, ok1 := s.find("heap bytes/pod", Label{"cache", "informerd (managedFields stripped)"}, Label{"pods", n})
		cg, ok2 := s.find("heap bytes/pod", Label{"cache", "client-go informer (managedFields stripped)"}, Label{"pods", n})
		if ok1 && ok2 {
			r := inf / cg
			s.Goals = append(s.Goals, Goal{Name: "heap per pod, informerd / client-go informer, same transform (" + n + " pods)", Target: "≤ 0.5×",
				Measured: r, Met: r <= 0.5, Detail: fmt.Sprintf("%.2f× (%.0f vs %.0f bytes)", r, inf, cg)})
		}
	}
	s.Notes = append(s.Notes,
		"heap: the Go heap live after a forced GC (go_gc_heap_live_bytes after /debug/pprof/heap?gc=1 for informerd; runtime/metrics after runtime.GC in the client-go child), minus the same process caching an empty namespace.",
		"RSS: /proc VmRSS, minus the empty-namespace process; it includes memory the Go runtime has not returned yet, so it is noisier than heap.",
		"JSON: the pods' JSON as kube-apiserver serves it in a list (managedFields included).")
	return s, nil
}

func daemonMemory(ctx context.Context, b *bench, ns string) (heap, rss float64, err error) {
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(ns))
	if err != nil {
		return 0, 0, err
	}
	defer d.stop()
	if heap, err = d.liveHeap(ctx); err != nil {
		return 0, 0, err
	}
	r, err := rssBytes(d.pid)
	return heap, float64(r), err
}

func informerMemory(b *bench, ns string, strip bool) (heap, rss float64, err error) {
	c, err := startChild("informer", "--kubeconfig="+b.cluster.kubeconfig, "--namespace="+ns, "--strip-managed-fields="+strconv.FormatBool(strip))
	if err != nil {
		return 0, 0, err
	}
	defer c.stop()
	r, err := rssBytes(c.pid())
	return c.report.HeapLive, float64(r), err
}

// listJSONBytes is the size of the pods' JSON in a list from the API server.
func listJSONBytes(ctx context.Context, b *bench, ns string) (float64, error) {
	raw, err := b.cluster.kube.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, err
	}
	total := 0
	for _, it := range list.Items {
		total += len(it)
	}
	return float64(total), nil
}
