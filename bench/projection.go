package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/informerd/informerd/bench/internal/wirecount"
)

// The projected variants of the sidecars and fan-out scenarios (issue 23):
// watchers of their node's pods receiving whole objects against watchers
// receiving only projectionFields, under a churn that changes a field in
// the mask and one that changes only status conditions.

// projectionFields is the field mask of issue 23's thin clients: what a
// node agent reads of its node's pods.
var projectionFields = []string{"metadata.name", "metadata.labels", "status.podIP"}

// projectionWrites is the churns' writes per second.
const projectionWrites = 100

// projectionEdits are the churns each kind of watcher meets: a label, in
// the mask, and status heartbeats, outside it.
var projectionEdits = []edit{labelEdit, heartbeatEdit}

// churnLabel is the rows' churn label for a churn of e.
func churnLabel(e edit) string {
	what := map[string]string{labelEdit.name: "a label", heartbeatEdit.name: "status heartbeats"}[e.name]
	return fmt.Sprintf("%s, %d/s", what, projectionWrites)
}

// projectionPhase writes e at projectionWrites per second for b.phaseTime
// while n watchers (watcher i on node i mod b.nodes) of informerd process
// pid receive it, and adds to the row labels what they received (counts
// returns their totals so far, or an error if a stream ended) and
// informerd's CPU per write. It returns the writes' acknowledgements.
func (b *bench) projectionPhase(ctx context.Context, t *table, labels []Label, pid, n int, e edit, counts func(context.Context) (wirecount.Counts, error)) (map[string]time.Time, error) {
	before, err := counts(ctx)
	if err != nil {
		return nil, err
	}
	hits := make([]int, b.nodes) // writes to each node's pods (pod p is on node p mod nodes)
	m := meterCPU(pid)
	acks, err := churnEdits(ctx, b.cluster, b.ns, b.pods, projectionWrites, b.phaseTime, e, func(p int) { hits[p%b.nodes]++ })
	if err != nil {
		return nil, err
	}
	after, err := settleCounts(ctx, counts)
	if err != nil {
		return nil, err
	}
	cpu, _ := m.stop()
	changes := 0
	for i := range n {
		changes += hits[i%b.nodes]
	}
	got := after.Sub(before)
	perWrite := 1e6 * cpu[0] / float64(max(1, len(acks)))
	t.add(labels, "writes", float64(len(acks)))
	t.add(labels, "changes to watched pods", float64(changes))
	t.add(labels, "events delivered", float64(got.Events))
	t.add(labels, "bookmarks delivered", float64(got.Bookmarks))
	t.add(labels, "wire KiB", float64(got.EventBytes+got.BookmarkBytes)/(1<<10))
	if got.Events > 0 {
		t.add(labels, "wire bytes per event", float64(got.EventBytes)/float64(got.Events))
	}
	t.add(labels, "informerd CPU-µs per write", perWrite)
	logf("%v: %d writes, %d to the watched pods; %d events, %d bookmarks, %d bytes on the wire; informerd %.0f CPU-µs per write",
		labels, len(acks), changes, got.Events, got.Bookmarks, got.EventBytes+got.BookmarkBytes, perWrite)
	return acks, nil
}

// settleCounts returns the watchers' counts once they have not changed
// for 500ms (as quiesce waits for the fan-out's watchers), or after 60s.
func settleCounts(ctx context.Context, counts func(context.Context) (wirecount.Counts, error)) (wirecount.Counts, error) {
	last, still := wirecount.Counts{Events: -1}, time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := counts(ctx)
		if err != nil {
			return c, err
		}
		switch {
		case c != last:
			last, still = c, time.Now()
		case time.Since(still) > 500*time.Millisecond || time.Now().After(deadline):
			return c, nil
		}
	}
}

// projectionColumns are the columns of the projected variants' rows.
var projectionColumns = []string{"writes", "changes to watched pods", "events delivered", "bookmarks delivered", "wire KiB", "wire bytes per event", "informerd CPU-µs per write"}

// projectionGoals judge a projected variant's rows, found by at(projected,
// churn) among s's rows: under status heartbeats the projected watchers
// receive no event and the whole-object ones every change to their pods;
// beside them, reported, projected against whole: the bytes on the wire
// per event and informerd's CPU per write. who names the watchers and N.
func projectionGoals(s *Scenario, who string, at func(projected bool, e edit) []Label) []Goal {
	var goals []Goal
	if st, ok := s.stat("events delivered", at(true, heartbeatEdit)...); ok {
		goals = append(goals, Goal{Name: "events to projected " + who + " under status heartbeats", Target: "0",
			Measured: st.Max, Met: st.Max == 0, Detail: runsList(st) + " (each run)"})
	}
	got, ok1 := s.stat("events delivered", at(false, heartbeatEdit)...)
	want, ok2 := s.stat("changes to watched pods", at(false, heartbeatEdit)...)
	if ok1 && ok2 {
		all := len(got.Runs) == len(want.Runs)
		for i := range got.Runs {
			all = all && got.Runs[i] == want.Runs[i]
		}
		goals = append(goals, Goal{Name: "events to whole-object " + who + " under status heartbeats: every change to their pods", Target: "every change",
			Measured: got.Median / max(1, want.Median), Met: all, Detail: fmt.Sprintf("%s events for %s changes", runsList(got), runsList(want))})
	}
	for _, c := range []struct {
		column, what, unit string
		e                  edit
	}{
		{"wire bytes per event", "bytes on the wire per event", "bytes", labelEdit},
		{"informerd CPU-µs per write", "informerd CPU per write", "CPU-µs", labelEdit},
		{"informerd CPU-µs per write", "informerd CPU per write", "CPU-µs", heartbeatEdit},
	} {
		p, ok1 := s.find(c.column, at(true, c.e)...)
		w, ok2 := s.find(c.column, at(false, c.e)...)
		if ok1 && ok2 && w > 0 {
			goals = append(goals, Goal{Name: c.what + ", projected / whole-object " + who + ", " + churnLabel(c.e),
				Measured: p / w, Detail: fmt.Sprintf("%.2f× (%s vs %s %s)", p/w, num(p), num(w), c.unit)})
		}
	}
	return goals
}

// runsList prints each run's count: "0, 0, 0".
func runsList(st *Stat) string {
	parts := make([]string, len(st.Runs))
	for i, v := range st.Runs {
		parts[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}

// projectionNote describes the projected variant's churns and counts.
func projectionNote(b *bench) string {
	return fmt.Sprintf("Each kind of watcher meets two churns of %v at %d writes/s to random pods: a label (in the mask: every change to a watched pod reaches both kinds) and status heartbeats (a strategic merge patch of the status subresource setting the Ready condition's lastProbeTime and message: outside the mask, so a projected watcher should receive nothing); the fan-out's churn, an annotation, is outside the mask too. Both kinds allow bookmarks. "+
		"changes to watched pods: the acknowledged writes to pods on the watchers' nodes, what a whole-object watcher receives. events delivered: ADDED, MODIFIED and DELETED responses received until the counts hold still for 500 ms; bookmarks delivered: BOOKMARK responses, counted apart. wire KiB: the bytes of those Watch responses on the wire, each message's encoded size plus gRPC's 5-byte message header, from a gRPC stats handler on the watchers' connections (InPayload.WireLength; HTTP/2 frame headers not counted); wire bytes per event: the events' bytes over their number. "+
		"informerd CPU-µs per write: informerd's CPU from /proc over the churn and until the counts hold still, over the writes (its ingest included).", b.phaseTime, projectionWrites)
}
