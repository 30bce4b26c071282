package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// tiersRate is the tiers scenario's churn, in writes per second: the
// fan-out's paced phase.
const tiersRate = 100

// The tiers scenario's topologies, by their rows' label.
const (
	topoTiers  = "root + leaves"
	topoDirect = "one informerd"
)

// tiersColumns: "root" is the informerd that the API server feeds: the
// root of the leaves, or the one informerd serving every watcher.
var tiersColumns = []string{"writes/s", "delivered/s", "delivered / expected %",
	"API server pod watches", "root watch starts at the API server", "root streams",
	"root CPU-s", "root ingest CPU-µs per write", "root CPU-µs per event it delivered", "root serving CPU-µs per event it delivered", "root CPU-µs per client delivery",
	"root heap KiB per stream", "root RSS MiB",
	"leaf CPU-s sum", "leaf CPU-s max", "leaf CPU-µs per client delivery", "leaf RSS MiB mean", "leaf RSS MiB max",
	"p50 ms", "p90 ms", "p99 ms", "signed p50 ms", "signed p90 ms"}

// tiers is scenario 8 (issue 24): pods spread over nodes; watchers per
// node, each watching its node's pods by index, through a root informerd
// and a leaf informerd per node (the leaf's part: the root's node index,
// its node taken from NODE_NAME), against the same watchers on one
// informerd over the API server. Both under the same churn.
func tiers(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{Name: "tiers", Title: "8. Tiers: informerd over informerd", Plot: "p99 ms", Columns: tiersColumns}
	const ns = "tiers"
	if err := b.cluster.loadPods(ctx, ns, b.tiersPods, b.tiersNodes); err != nil {
		return s, err
	}
	leafCfg, err := writeLeafConfig(b.dir, ns)
	if err != nil {
		return s, err
	}
	t := newTable()
	for run := range b.runs {
		for _, topo := range []string{topoTiers, topoDirect} {
			if err := b.tiersRun(ctx, t, run, ns, leafCfg, topo); err != nil {
				return s, fmt.Errorf("%s: %w", topo, err)
			}
		}
	}
	s.Rows = t.rows()
	s.Goals = tiersGoals(&s)
	s.Notes = tiersNotes(b)
	return s, nil
}

// tiersRun measures one topology once and adds its row. It starts the
// root (a fresh informerd over the API server) and measures its CPU per
// write with nothing connected; then, for topoTiers, a leaf per node over
// it; then the watchers, per node on the node's leaf or on the root; then
// a phase of churn. It stops what it started before it returns.
func (b *bench) tiersRun(ctx context.Context, t *table, run int, ns, leafCfg, topo string) error {
	watchesBefore, err := podWatches(ctx, b)
	if err != nil {
		return err
	}
	root, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(ns))
	if err != nil {
		return err
	}
	defer root.stop()
	time.Sleep(2 * time.Second) // the tail of its start (its list's memory return) left out
	// The root's cost of ingesting the writes, nothing connected: taken
	// from its CPU, what is left is its cost of serving.
	m := meterCPU(root.pid)
	acks, err := churn(ctx, b.cluster, ns, b.tiersPods, b.tiersNodes, tiersRate, b.tiersPhase)
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // as settle's least wait
	cpu, _ := m.stop()
	ingest := cpu[0] / float64(max(1, len(acks)))
	heapAlone, err := root.liveHeap(ctx)
	if err != nil {
		return err
	}

	var ls leaves
	addr := func(int) string { return root.grpcAddr }
	if topo == topoTiers {
		start := time.Now()
		if ls, err = startLeaves(b.informerdBin, leafCfg, root.grpcAddr, b.tiersNodes); err != nil {
			return err
		}
		defer ls.stop()
		logf("run %d, %d leaves ready in %v", run+1, len(ls), time.Since(start).Round(100*time.Millisecond))
		addr = func(k int) string { return ls[k].grpcAddr }
	}
	w, err := nodeWatchers(ctx, addr, b.tiersNodes, b.tiersPerNode)
	if err != nil {
		return err
	}
	defer w.close()
	heapServing, err := root.liveHeap(ctx)
	if err != nil {
		return err
	}
	watchesDuring, err := podWatches(ctx, b)
	if err != nil {
		return err
	}
	before, err := scrape(ctx, root.metricsURL)
	if err != nil {
		return err
	}

	w.take()
	pids := append([]int{root.pid}, ls.pids()...)
	m = meterCPU(pids...)
	acks, err = churn(ctx, b.cluster, ns, b.tiersPods, b.tiersNodes, tiersRate, b.tiersPhase)
	if err != nil {
		return err
	}
	settle(w.received)
	cpu, _ = m.stop()
	got := w.take()
	if err := w.failed(); err != nil {
		return fmt.Errorf("%w; its deliveries would be undercounted", err)
	}
	if err := foreign(topo, got, acks); err != nil {
		return err
	}
	after, err := scrape(ctx, root.metricsURL)
	if err != nil {
		return err
	}

	pods := map[string]string{"resource": "pods"}
	delivered := float64(total(got))
	// Each write changes one pod, on one node, whose perNode watchers
	// all receive it.
	expected := float64(len(acks) * b.tiersPerNode)
	// What the root handed to its streams: the leaves', or the watchers'.
	rootDelivered := after.sum("informerd_watch_delivery_delay_seconds_count", pods) - before.sum("informerd_watch_delivery_delay_seconds_count", pods)
	streams := after.sum("informerd_watchers", pods)
	rootCPU := cpu[0]
	rootServing := max(0, rootCPU-float64(len(acks))*ingest)
	ds := sortedDelays(got, acks, true)
	p50, p90, p99 := percentile(ds, 50), percentile(ds, 90), percentile(ds, 99)
	// Half the events reach the watchers before the writer has read its
	// response: the clipped median is 0 in both topologies. Unclipped,
	// the difference of the topologies' medians is the delay a tier adds.
	signed := sortedDelays(got, acks, false)
	d := b.tiersPhase.Seconds()

	labels := []Label{{"topology", topo}, {"nodes", strconv.Itoa(b.tiersNodes)}, {"watchers", strconv.Itoa(b.tiersNodes * b.tiersPerNode)}}
	t.add(labels, "writes/s", float64(len(acks))/d)
	t.add(labels, "delivered/s", delivered/d)
	t.add(labels, "delivered / expected %", 100*delivered/max(1, expected))
	t.add(labels, "API server pod watches", watchesDuring-watchesBefore)
	t.add(labels, "root watch starts at the API server", after.sum("informerd_upstream_watch_starts_total", pods))
	t.add(labels, "root streams", streams)
	t.add(labels, "root CPU-s", rootCPU)
	t.add(labels, "root ingest CPU-µs per write", 1e6*ingest)
	t.add(labels, "root CPU-µs per event it delivered", 1e6*rootCPU/max(1, rootDelivered))
	t.add(labels, "root serving CPU-µs per event it delivered", 1e6*rootServing/max(1, rootDelivered))
	t.add(labels, "root CPU-µs per client delivery", 1e6*rootCPU/max(1, delivered))
	t.add(labels, "root heap KiB per stream", (heapServing-heapAlone)/max(1, streams)/1024)
	rss, _ := rssBytes(root.pid)
	t.add(labels, "root RSS MiB", float64(rss)/(1<<20))
	if len(ls) > 0 {
		var sum, most, rssSum, rssMost float64
		for i, l := range ls {
			sum, most = sum+cpu[1+i], max(most, cpu[1+i])
			r, _ := rssBytes(l.pid)
			rssSum, rssMost = rssSum+float64(r), max(rssMost, float64(r))
		}
		t.add(labels, "leaf CPU-s sum", sum)
		t.add(labels, "leaf CPU-s max", most)
		t.add(labels, "leaf CPU-µs per client delivery", 1e6*sum/max(1, delivered))
		t.add(labels, "leaf RSS MiB mean", rssSum/float64(len(ls))/(1<<20))
		t.add(labels, "leaf RSS MiB max", rssMost/(1<<20))
	}
	t.add(labels, "p50 ms", p50)
	t.add(labels, "p90 ms", p90)
	t.add(labels, "p99 ms", p99)
	t.add(labels, "signed p50 ms", percentile(signed, 50))
	t.add(labels, "signed p90 ms", percentile(signed, 90))
	logf("run %d, %s: %.0f writes/s, %.0f delivered/s (%.1f%% of expected), root %.2f CPU-s over %.0f events it delivered to %.0f streams, p50 %.1f ms (signed %.2f), p99 %.1f ms",
		run+1, topo, float64(len(acks))/d, delivered/d, 100*delivered/max(1, expected), rootCPU, rootDelivered, streams, p50, percentile(signed, 50), p99)
	return nil
}

// tiersGoals are the figures issue 24 asks for, with no target: the API
// server's watches and the delay a tier adds.
func tiersGoals(s *Scenario) []Goal {
	var goals []Goal
	for _, topo := range []string{topoTiers, topoDirect} {
		if w, ok := s.find("API server pod watches", Label{"topology", topo}); ok {
			goals = append(goals, Goal{Name: "pod watches at kube-apiserver, " + topo, Measured: w, Detail: fmt.Sprintf("%.0f", w)})
		}
	}
	for _, col := range []string{"p50 ms", "p90 ms", "p99 ms", "signed p50 ms", "signed p90 ms"} {
		a, ok1 := s.find(col, Label{"topology", topoTiers})
		d, ok2 := s.find(col, Label{"topology", topoDirect})
		if ok1 && ok2 {
			goals = append(goals, Goal{Name: "delay added by the leaf tier, " + strings.TrimSuffix(col, " ms"), Measured: a - d,
				Detail: fmt.Sprintf("%+.1f ms (%.1f vs %.1f ms)", a-d, a, d)})
		}
	}
	return goals
}

func tiersNotes(b *bench) []string {
	return []string{
		fmt.Sprintf("%d pods in namespace tiers, spread over %d nodes (spec.nodeName); %d watchers per node, each watching its node's pods by the `node` index; %d writes/s (merge patches of one annotation on random pods) for %v per phase.", b.tiersPods, b.tiersNodes, b.tiersPerNode, tiersRate, b.tiersPhase),
		fmt.Sprintf("root + leaves: a root informerd over the API server (a `node` index on pods) and a leaf informerd per node (`--upstream-informerd` the root), all %d leaves with one configuration whose `upstreamSelector.index` is `node=${NODE_NAME}` and NODE_NAME set in each one's environment, as a DaemonSet's downward API would; each node's watchers watch its leaf. one informerd: the same watchers on one informerd over the API server. Each node's watchers share a gRPC connection in both.", b.tiersNodes),
		"Every process is started afresh for each topology and run; the root's ingest CPU per write is measured first, for as long as a phase, with nothing connected to it; serving CPU is its CPU minus that per write.",
		"API server pod watches: the rise of kube-apiserver's apiserver_longrunning_requests{verb=\"WATCH\",resource=\"pods\"} from before the root started to while everything runs. root watch starts: its informerd_upstream_watch_starts_total{resource=\"pods\"}. root streams: its informerd_watchers{resource=\"pods\"} (the leaves' watches, or the clients').",
		"events it delivered: the rise of the root's informerd_watch_delivery_delay_seconds_count{resource=\"pods\"} over the phase, one per event handed to one of its streams: the leaves', or the clients'. A client delivery is an event a watcher received; delivered / expected: client deliveries over writes × watchers per node (each write changes one pod, on one node).",
		"root heap per stream: the rise of its live heap (after a forced GC) from before its leaves or clients connected to after, over its streams. RSS: /proc VmRSS after the phase.",
		"delay: from the write's acknowledgement (kube-apiserver's response to the patch, as the writer in the harness's process reads it) to each watcher's receipt, as in the fan-out: an event that arrives before the acknowledgement counts as 0. About half do, in both topologies, so the p50 is 0 in both; signed: the same delays with those kept as negative (the time by which the event beat the acknowledgement), whose difference between the topologies is the delay a tier adds at the median.",
		"The watchers run in the harness's process; every process shares the machine's cores with kube-apiserver and etcd.",
	}
}
