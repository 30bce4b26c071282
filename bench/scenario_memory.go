package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/informerd/informerd/internal/memlimit"
)

// The memory scenario's phases: each is a row per cache and size.
const (
	phaseSync   = "after initial sync"
	phaseChurn  = "after churn at 100 writes/s"
	phaseRelist = "after relist"
)

// The caches the memory scenario compares.
const (
	informerdCache = "informerd (managedFields stripped)"
	informerCache  = "client-go informer (managedFields stripped)"
	informerFull   = "client-go informer"
)

// memory is scenario 2: heap and RSS per cached pod, informerd against a
// client-go SharedIndexInformer holding the same pods, with and without
// managedFields, against the pods' JSON size; and the memory the kernel
// sees through each cache's life (issue 22): the peak RSS of the initial
// sync, the steady RSS after it and after churn, and the peak and steady
// RSS of a full relist.
func memory(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:  "memory",
		Title: "2. Memory per cached pod",
		Plot:  "heap bytes/pod",
		Columns: []string{"heap bytes/pod", "RSS bytes/pod", "RSS / heap per pod", "peak RSS MiB", "RSS MiB", "peak / steady RSS",
			"heap MiB", "JSON bytes/pod"},
	}
	t := newTable()
	empty := "mem-empty"
	if err := b.cluster.loadPods(ctx, empty, 0, 1); err != nil {
		return s, err
	}
	peaksReset := true
	for _, size := range b.memorySizes {
		ns := fmt.Sprintf("mem-%d", size)
		if err := b.cluster.loadPods(ctx, ns, size, b.nodes); err != nil {
			return s, err
		}
		jsonBytes, err := listJSONBytes(ctx, b, ns)
		if err != nil {
			return s, err
		}
		pods := strconv.Itoa(size)
		for run := range b.runs {
			reset, err := b.memoryLife(ctx, t, ns, empty, size, jsonBytes)
			if err != nil {
				return s, err
			}
			peaksReset = peaksReset && reset
			// The client-go informer that keeps managedFields: heap and
			// RSS after its sync only.
			heap, rss, err := informerMemory(b, ns, false)
			if err != nil {
				return s, err
			}
			baseHeap, baseRSS, err := informerMemory(b, empty, false)
			if err != nil {
				return s, err
			}
			labels := []Label{{"cache", informerFull}, {"pods", pods}, {"phase", phaseSync}}
			t.add(labels, "heap bytes/pod", (heap-baseHeap)/float64(size))
			t.add(labels, "RSS bytes/pod", (rss-baseRSS)/float64(size))
			t.add(labels, "JSON bytes/pod", jsonBytes/float64(size))
			logf("run %d, memory of %d pods measured", run+1, size)
		}
	}
	s.Rows = t.rows()
	s.Goals = memoryGoals(&s, b.memorySizes)
	peak := "VmHWM, reset (clear_refs) just before kube-apiserver is killed"
	if !peaksReset {
		peak = "VmHWM since the process started (this machine refused to reset it through /proc/<pid>/clear_refs), so at least the initial sync's peak"
	}
	s.Notes = append(s.Notes,
		"Each run starts informerd and a client-go informer afresh on the namespace, and follows both: "+
			fmt.Sprintf("%v after each is ready (%s); then after %v of churn at 100 writes/s to random pods and %v more (%s); ", b.memorySettle, phaseSync, b.memoryChurn, b.memorySettle, phaseChurn)+
			fmt.Sprintf("then kube-apiserver is killed, etcd compacted while it is down and kube-apiserver started again, so every upstream watch gets 410 Gone and relists; %v after both have relisted (informerd's informerd_upstream_relists_total grew, the informer's handlers were called once per pod): %s.", b.memorySettle, phaseRelist),
		"heap: the Go heap live after a forced GC (go_gc_heap_live_bytes after /debug/pprof/heap?gc=1 for informerd; runtime/metrics after runtime.GC in the client-go child); per pod, minus the same process caching an empty namespace.",
		"RSS: /proc VmRSS, read before the forced GC; per pod, minus the empty-namespace process (also read after its settle). RSS / heap per pod is each run's RSS bytes/pod over its heap bytes/pod.",
		"peak RSS: for the initial sync, VmHWM since the process started, read after the settle; for the relist, "+peak+". peak / steady RSS is each run's peak over the RSS of the same row (whole processes, not per pod).",
		"informerd runs with its defaults (--return-memory, --gc-percent, --memory-limit-ratio: docs/configuration.md#memory); the harness sets no memory flag and no GOGC or GOMEMLIMIT. "+cgroupNote(),
		"JSON: the pods' JSON as kube-apiserver serves it in a list (managedFields included).")
	return s, nil
}

// memoryLife follows a fresh informerd and a fresh client-go informer (the
// same transform) on ns through the initial sync, churn and a relist, and
// adds their rows to t. It returns whether the peaks could be reset before
// the relist.
func (b *bench) memoryLife(ctx context.Context, t *table, ns, empty string, size int, jsonBytes float64) (bool, error) {
	// The baselines: the same processes caching an empty namespace.
	base, err := b.emptyFootprints(ctx, empty)
	if err != nil {
		return false, err
	}
	procs, stop, err := b.startCaches(ns, size)
	if err != nil {
		return false, err
	}
	defer stop()
	names := []string{informerdCache, informerCache}

	record := func(phase string, fs []footprint) {
		for i, f := range fs {
			labels := []Label{{"cache", names[i]}, {"pods", strconv.Itoa(size)}, {"phase", phase}}
			heapPod := (f.heap - base[i].heap) / float64(size)
			rssPod := (f.rss - base[i].rss) / float64(size)
			t.add(labels, "heap bytes/pod", heapPod)
			t.add(labels, "RSS bytes/pod", rssPod)
			t.add(labels, "RSS / heap per pod", rssPod/heapPod)
			t.add(labels, "RSS MiB", f.rss/(1<<20))
			t.add(labels, "heap MiB", f.heap/(1<<20))
			if f.peak > 0 {
				t.add(labels, "peak RSS MiB", f.peak/(1<<20))
				t.add(labels, "peak / steady RSS", f.peak/f.rss)
			}
			if phase == phaseSync {
				t.add(labels, "JSON bytes/pod", jsonBytes/float64(size))
			}
		}
	}
	sleep(ctx, b.memorySettle)
	fs, err := measureAll(ctx, procs, true)
	if err != nil {
		return false, err
	}
	record(phaseSync, fs)

	if _, err := churn(ctx, b.cluster, ns, size, b.nodes, 100, b.memoryChurn); err != nil {
		return false, fmt.Errorf("churn: %w", err)
	}
	sleep(ctx, b.memorySettle)
	if fs, err = measureAll(ctx, procs, false); err != nil {
		return false, err
	}
	record(phaseChurn, fs)

	reset, err := forceRelist(ctx, b, procs)
	if err != nil {
		return false, err
	}
	sleep(ctx, b.memorySettle)
	if fs, err = measureAll(ctx, procs, true); err != nil {
		return false, err
	}
	record(phaseRelist, fs)
	return reset, nil
}

// emptyFootprints measures informerd and the client-go informer (managed
// fields stripped) caching the empty namespace ns, each after the settle.
func (b *bench) emptyFootprints(ctx context.Context, ns string) ([]footprint, error) {
	procs, stop, err := b.startCaches(ns, 0)
	if err != nil {
		return nil, err
	}
	defer stop()
	sleep(ctx, b.memorySettle)
	return measureAll(ctx, procs, false)
}

// startCaches starts informerd, then a client-go informer (managedFields
// stripped), on the pods of ns, and returns them once both are ready, in
// that order, with a function that stops both.
func (b *bench) startCaches(ns string, pods int) ([]*cacheProc, func(), error) {
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfigStrip(ns, true))
	if err != nil {
		return nil, nil, err
	}
	c, err := startChild("informer", "--kubeconfig="+b.cluster.kubeconfig, "--namespace="+ns, "--strip-managed-fields=true")
	if err != nil {
		d.stop()
		return nil, nil, err
	}
	stop := func() { c.stop(); d.stop() }
	return []*cacheProc{informerdProc(d), informerProc(c, pods)}, stop, nil
}

// memoryGoals judges issue 22's memory goals on informerd's rows and
// reports the client-go informer's ratios beside them, with each run's
// ratios; and keeps the heap goal against client-go.
func memoryGoals(s *Scenario, sizes []int) []Goal {
	var goals []Goal
	for _, size := range sizes {
		n := strconv.Itoa(size)
		inf, ok1 := s.find("heap bytes/pod", Label{"cache", informerdCache}, Label{"pods", n}, Label{"phase", phaseSync})
		cg, ok2 := s.find("heap bytes/pod", Label{"cache", informerCache}, Label{"pods", n}, Label{"phase", phaseSync})
		if ok1 && ok2 {
			r := inf / cg
			goals = append(goals, Goal{Name: "heap per pod, informerd / client-go informer, same transform (" + n + " pods)", Target: "≤ 0.5×",
				Measured: r, Met: r <= 0.5, Detail: fmt.Sprintf("%.2f× (%.0f vs %.0f bytes)", r, inf, cg)})
		}
	}
	ratio := func(cache, column, name, n, phase string, judged bool) {
		st, ok := s.stat(column, Label{"cache", cache}, Label{"pods", n}, Label{"phase", phase})
		if !ok {
			return
		}
		g := Goal{Name: name + ", " + cache + " (" + n + " pods, " + phase + ")", Measured: st.Median,
			Detail: fmt.Sprintf("%.2f× (runs %s)", st.Median, st.ratios())}
		if judged {
			g.Target, g.Met = "≤ 1.5×", st.Median <= 1.5
		}
		goals = append(goals, g)
	}
	for _, cache := range []string{informerdCache, informerCache} {
		judged := cache == informerdCache
		for _, size := range sizes {
			n := strconv.Itoa(size)
			for _, phase := range []string{phaseSync, phaseChurn, phaseRelist} {
				ratio(cache, "RSS / heap per pod", "steady RSS / live heap per pod", n, phase, judged)
			}
			ratio(cache, "peak / steady RSS", "peak RSS of the initial sync / steady RSS after it", n, phaseSync, judged)
			ratio(cache, "peak / steady RSS", "peak RSS of the relist / steady RSS after it", n, phaseRelist, judged)
		}
	}
	return goals
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
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

// cgroupNote says what memory limit the cgroup of the harness, and so of
// the processes it starts, sets: the limit --memory-limit-ratio derives
// informerd's from.
func cgroupNote() string {
	c, err := memlimit.Cgroup("/")
	switch {
	case err != nil:
		return fmt.Sprintf("This machine's cgroup memory limit could not be read (%v).", err)
	case c.Bytes == 0:
		return "This machine's cgroup sets no memory limit, so informerd sets no soft memory limit: the figures are those of the memory return and GOGC."
	}
	return fmt.Sprintf("This machine's %s sets a memory limit of %.0f MiB (%s), from which informerd derives its soft memory limit.", c.Version, float64(c.Bytes)/(1<<20), c.File)
}
