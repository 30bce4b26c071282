package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// sidecars is scenario 3: N processes each running their own client-go pod
// informer, against N thin gRPC clients of one informerd.
func sidecars(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "sidecars",
		Title:   "3. N sidecars",
		Plot:    "total RSS MiB",
		Columns: []string{"total RSS MiB", "kube-apiserver CPU-s to start", "pod watches at kube-apiserver"},
	}
	t := newTable()
	// A fresh informerd: the shared one carries the fan-out scenario's
	// churn in its history and its peak RSS.
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(b.ns))
	if err != nil {
		return s, err
	}
	defer d.stop()
	for run := range b.runs {
		for _, n := range b.sidecars {
			// N informers.
			before, err := podWatches(ctx, b)
			if err != nil {
				return s, err
			}
			m := meterCPU(b.cluster.apiPID)
			var kids []*child
			stopAll := func() {
				for _, k := range kids {
					k.stop()
				}
				kids = nil
			}
			for range n {
				k, err := startChild("informer", "--kubeconfig="+b.cluster.kubeconfig, "--namespace="+b.ns, "--strip-managed-fields=true")
				if err != nil {
					stopAll()
					return s, err
				}
				kids = append(kids, k)
			}
			cpu, _ := m.stop()
			rss := 0.0
			for _, k := range kids {
				r, _ := rssBytes(k.pid())
				rss += float64(r)
			}
			during, err := podWatches(ctx, b)
			if err != nil {
				stopAll()
				return s, err
			}
			labels := []Label{{"clients", "client-go informer per process"}, {"N", strconv.Itoa(n)}}
			t.add(labels, "total RSS MiB", rss/(1<<20))
			t.add(labels, "kube-apiserver CPU-s to start", cpu[0])
			t.add(labels, "pod watches at kube-apiserver", during-before)
			stopAll()

			// N thin clients on the one informerd.
			if before, err = podWatches(ctx, b); err != nil {
				return s, err
			}
			m = meterCPU(b.cluster.apiPID)
			for i := range n {
				k, err := startChild("thin", "--addr="+d.grpcAddr, "--node="+nodeName(i, b.nodes))
				if err != nil {
					stopAll()
					return s, err
				}
				kids = append(kids, k)
			}
			cpu, _ = m.stop()
			r, _ := rssBytes(d.pid)
			rss = float64(r)
			for _, k := range kids {
				r, _ := rssBytes(k.pid())
				rss += float64(r)
			}
			if during, err = podWatches(ctx, b); err != nil {
				stopAll()
				return s, err
			}
			labels = []Label{{"clients", "thin gRPC clients + one informerd"}, {"N", strconv.Itoa(n)}}
			t.add(labels, "total RSS MiB", rss/(1<<20))
			t.add(labels, "kube-apiserver CPU-s to start", cpu[0])
			// informerd's own watch, plus any the clients added (none).
			t.add(labels, "pod watches at kube-apiserver", 1+during-before)
			stopAll()
			logf("run %d, %d sidecars measured", run+1, n)
		}
	}
	s.Rows = t.rows()
	n := strconv.Itoa(b.sidecars[len(b.sidecars)-1])
	inf, ok1 := s.find("total RSS MiB", Label{"clients", "thin gRPC clients + one informerd"}, Label{"N", n})
	cg, ok2 := s.find("total RSS MiB", Label{"clients", "client-go informer per process"}, Label{"N", n})
	if ok1 && ok2 {
		r := inf / cg
		s.Goals = append(s.Goals, Goal{Name: "total memory, thin clients + informerd / informer per process (N=" + n + ")", Target: "≤ 0.2×",
			Measured: r, Met: r <= 0.2, Detail: fmt.Sprintf("%.2f× (%.0f vs %.0f MiB)", r, inf, cg)})
	}
	for _, size := range b.sidecars {
		n := strconv.Itoa(size)
		w, ok := s.find("pod watches at kube-apiserver", Label{"clients", "thin gRPC clients + one informerd"}, Label{"N", n})
		if ok {
			s.Goals = append(s.Goals, Goal{Name: "pod watches at kube-apiserver with informerd (N=" + n + ")", Target: "1",
				Measured: w, Met: w == 1, Detail: fmt.Sprintf("%.0f", w)})
		}
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("Each client caches or watches the pods of %s (%d pods); an informer process strips managedFields (the kindest comparison for client-go); a thin client lists its node's pods by index and watches them.", b.ns, b.pods),
		"total RSS: the sum of /proc VmRSS over every process of the setup, informerd included.",
		"watches: the rise of kube-apiserver's apiserver_longrunning_requests{verb=\"WATCH\",resource=\"pods\"} while the clients run, plus informerd's own watch for the informerd setup.")
	return s, nil
}

// podWatches reads the pod watches open at the API server once the count
// has held still for a second (watches of clients that just started or
// stopped take a moment to register or end).
func podWatches(ctx context.Context, b *bench) (float64, error) {
	last := -1.0
	for range 30 {
		m, err := b.cluster.apiMetrics(ctx)
		if err != nil {
			return 0, err
		}
		n := m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": "pods"})
		if n == last {
			return n, nil
		}
		last = n
		time.Sleep(time.Second)
	}
	return last, nil
}
