package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/informerd/informerd/bench/internal/wirecount"
)

// The sidecars' projected variant's rows, by their clients label.
const wholeObjects = "thin gRPC clients, whole objects"

var projectedClients = "thin gRPC clients, fields " + strings.Join(projectionFields, ", ")

// noChurn is the churn label of the sidecar setups measured without one.
const noChurn = "none"

// projectedSidecars is the sidecars' projected variant: at the largest N,
// thin clients of a fresh informerd watching their node's pods whole, then
// thin clients watching only projectionFields, each under the projection
// churns. It adds a row per kind of client and churn.
func (b *bench) projectedSidecars(ctx context.Context, t *table) error {
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(b.ns))
	if err != nil {
		return err
	}
	defer d.stop()
	n := b.sidecars[len(b.sidecars)-1]
	for run := range b.runs {
		for _, v := range []struct{ label, fields string }{{wholeObjects, ""}, {projectedClients, strings.Join(projectionFields, ",")}} {
			if err := b.measureProjectedSidecars(ctx, t, d, n, v.label, v.fields); err != nil {
				return fmt.Errorf("%d sidecars, %s: %w", n, v.label, err)
			}
		}
		logf("run %d, %d sidecars, whole and projected, measured", run+1, n)
	}
	return nil
}

// measureProjectedSidecars starts n thin clients of d with fields (empty:
// whole objects) and adds a row for each churn: what they received,
// informerd's CPU per write and the clients' RSS after it. It stops them
// before it returns.
func (b *bench) measureProjectedSidecars(ctx context.Context, t *table, d *daemon, n int, clients, fields string) error {
	var kids []*child
	defer func() {
		for _, k := range kids {
			k.stop()
		}
	}()
	for i := range n {
		args := []string{"--addr=" + d.grpcAddr, "--node=" + nodeName(i, b.nodes)}
		if fields != "" {
			args = append(args, "--fields="+fields)
		}
		k, err := startChild("thin", args...)
		if err != nil {
			return err
		}
		kids = append(kids, k)
		if got, want := k.report.Objects, podsOnNode(i, b.pods, b.nodes); got != want {
			return fmt.Errorf("sidecar %d has %d pods, want %d", i, got, want)
		}
	}
	counts := func(ctx context.Context) (wirecount.Counts, error) { return sumCounts(ctx, kids) }
	for _, e := range projectionEdits {
		labels := []Label{{"clients", clients}, {"N", strconv.Itoa(n)}, {"churn", churnLabel(e)}}
		if _, err := b.projectionPhase(ctx, t, labels, d.pid, n, e, counts); err != nil {
			return err
		}
		rss := 0.0
		for _, k := range kids {
			r, _ := rssBytes(k.pid())
			rss += float64(r)
		}
		t.add(labels, "clients' RSS MiB", rss/(1<<20))
	}
	return nil
}

// sumCounts asks each thin client what its watch has received and adds
// the answers up; a stream that ended is an error.
func sumCounts(ctx context.Context, kids []*child) (wirecount.Counts, error) {
	var sum wirecount.Counts
	for i, k := range kids {
		line, err := k.ask(ctx, "counts")
		if err != nil {
			return sum, fmt.Errorf("sidecar %d: %w", i, err)
		}
		var r wirecount.Report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return sum, fmt.Errorf("sidecar %d's counts %q: %w", i, line, err)
		}
		if r.Ended {
			return sum, fmt.Errorf("sidecar %d's watch ended; its deliveries would be undercounted", i)
		}
		sum = sum.Add(r.Counts)
	}
	return sum, nil
}

// projectedSidecarGoals judge the sidecars' projected variant, and report
// the clients' total RSS, projected against whole.
func projectedSidecarGoals(s *Scenario, b *bench) []Goal {
	n := strconv.Itoa(b.sidecars[len(b.sidecars)-1])
	at := func(projected bool, e edit) []Label {
		clients := wholeObjects
		if projected {
			clients = projectedClients
		}
		return []Label{{"clients", clients}, {"N", n}, {"churn", churnLabel(e)}}
	}
	goals := projectionGoals(s, "thin clients (N="+n+")", at)
	p, ok1 := s.find("clients' RSS MiB", at(true, labelEdit)...)
	w, ok2 := s.find("clients' RSS MiB", at(false, labelEdit)...)
	if ok1 && ok2 {
		goals = append(goals, Goal{Name: "clients' total RSS, projected / whole-object thin clients (N=" + n + "), after " + churnLabel(labelEdit),
			Measured: p / w, Detail: fmt.Sprintf("%.2f× (%s vs %s MiB)", p/w, num(p), num(w))})
	}
	return goals
}

// projectedSidecarNotes describe the sidecars' projected variant.
func projectedSidecarNotes(b *bench) []string {
	return []string{
		fmt.Sprintf("Projected variant (the rows with a churn), issue 23: at N=%d, a fresh informerd and N thin clients (bench/thin), first listing and watching their node's pods whole, then, started afresh, with the field mask `%s`.", b.sidecars[len(b.sidecars)-1], strings.Join(projectionFields, ", ")),
		projectionNote(b),
		"clients' RSS: the sum of the N thin clients' VmRSS after the churn, informerd not included.",
	}
}
