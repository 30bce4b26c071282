package main

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"

	"github.com/informerd/informerd/bench/internal/wirecount"
)

// The fan-out's projected variant's rows, by their variant label.
const wholeWatchers = "informerd, whole objects"

var projectedWatchers = "informerd, fields " + strings.Join(projectionFields, ", ")

// projectedFanOut is the fan-out's projected variant: at the largest N,
// gRPC watchers of the harness's informerd receiving whole pods against
// watchers receiving only projectionFields, each under the projection
// churns (at 100 writes/s only). It adds a row per kind of watcher and
// churn.
func (b *bench) projectedFanOut(ctx context.Context, t *table) error {
	n := b.largest()
	for _, v := range []struct {
		variant string
		fields  []string
	}{{wholeWatchers, []string{}}, {projectedWatchers, projectionFields}} {
		counter := &wirecount.Counter{}
		w, err := grpcWatchers(ctx, b.informerd.grpcAddr, n, b.nodes, nil, 0, v.fields, grpc.WithStatsHandler(counter))
		if err != nil {
			return err
		}
		counts := func(context.Context) (wirecount.Counts, error) { return counter.Counts(), w.failed() }
		for _, e := range projectionEdits {
			w.take()
			labels := []Label{{"variant", v.variant}, {"watchers", strconv.Itoa(n)}, {"phase", churnLabel(e)}}
			acks, err := b.projectionPhase(ctx, t, labels, b.informerd.pid, n, e, counts)
			if err != nil {
				w.close()
				return err
			}
			got := w.take()
			if err := checkReceipts(v.variant, w, got, acks); err != nil {
				w.close()
				return err
			}
			if total(got) > 0 {
				p50, p99 := delays(got, acks)
				t.add(labels, "p50 ms", p50)
				t.add(labels, "p99 ms", p99)
			}
		}
		w.close()
	}
	return nil
}

// projectedFanOutGoals judge the fan-out's projected variant.
func projectedFanOutGoals(s *Scenario, b *bench) []Goal {
	n := strconv.Itoa(b.largest())
	return projectionGoals(s, "gRPC watchers ("+n+")", func(projected bool, e edit) []Label {
		variant := wholeWatchers
		if projected {
			variant = projectedWatchers
		}
		return []Label{{"variant", variant}, {"watchers", n}, {"phase", churnLabel(e)}}
	})
}

// projectedFanOutNote describes the fan-out's projected variant.
func projectedFanOutNote(b *bench) string {
	return "Projected variant (the rows whose phase is a churn of a label or of status heartbeats), issue 23: at " + strconv.Itoa(b.largest()) +
		" watchers only and at 100 writes/s only, informerd's gRPC watchers as above, first receiving whole pods, then, opened afresh, with the field mask `" +
		strings.Join(projectionFields, ", ") + "`; their rows' CPU is informerd's whole process per write, not per delivered event (a projected watcher may receive none). " + projectionNote(b)
}
