package main

import (
	"strings"
	"testing"
)

// TestMemoryGoals: informerd's ratios are judged against 1.5× by their
// median and show each run's; the client-go informer's are reported.
func TestMemoryGoals(t *testing.T) {
	tb := newTable()
	for _, r := range []struct {
		cache, phase       string
		rssPerHeap, peaked float64
	}{
		{informerdCache, phaseSync, 1.1, 1.4},
		{informerdCache, phaseSync, 1.2, 1.6},
		{informerdCache, phaseSync, 1.7, 1.45},
		{informerdCache, phaseRelist, 1.6, 1.8},
		{informerCache, phaseSync, 1.3, 1.1},
	} {
		labels := []Label{{"cache", r.cache}, {"pods", "100"}, {"phase", r.phase}}
		tb.add(labels, "RSS / heap per pod", r.rssPerHeap)
		tb.add(labels, "peak / steady RSS", r.peaked)
	}
	s := &Scenario{Rows: tb.rows()}
	got := map[string]Goal{}
	for _, g := range memoryGoals(s, []int{100}) {
		got[g.Name] = g
	}
	for _, want := range []Goal{
		{Name: "steady RSS / live heap per pod, " + informerdCache + " (100 pods, " + phaseSync + ")", Target: "≤ 1.5×", Met: true, Detail: "1.20× (runs 1.10×, 1.20×, 1.70×)"},
		{Name: "peak RSS of the initial sync / steady RSS after it, " + informerdCache + " (100 pods, " + phaseSync + ")", Target: "≤ 1.5×", Met: true, Detail: "1.45× (runs 1.40×, 1.60×, 1.45×)"},
		{Name: "steady RSS / live heap per pod, " + informerdCache + " (100 pods, " + phaseRelist + ")", Target: "≤ 1.5×", Met: false, Detail: "1.60× (runs 1.60×)"},
		{Name: "peak RSS of the relist / steady RSS after it, " + informerdCache + " (100 pods, " + phaseRelist + ")", Target: "≤ 1.5×", Met: false, Detail: "1.80× (runs 1.80×)"},
		{Name: "steady RSS / live heap per pod, " + informerCache + " (100 pods, " + phaseSync + ")", Detail: "1.30× (runs 1.30×)"},
	} {
		g, ok := got[want.Name]
		if !ok {
			t.Errorf("no goal %q; goals: %v", want.Name, strings.Join(names(got), "; "))
			continue
		}
		if g.Target != want.Target || g.Met != want.Met || g.Detail != want.Detail {
			t.Errorf("%s: target %q, met %v, detail %q; want %q, %v, %q", want.Name, g.Target, g.Met, g.Detail, want.Target, want.Met, want.Detail)
		}
	}
}

func names(goals map[string]Goal) []string {
	var out []string
	for n := range goals {
		out = append(out, n)
	}
	return out
}
