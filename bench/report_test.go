package main

import (
	"strings"
	"testing"
)

func TestMarkdownGoals(t *testing.T) {
	r := &Report{Mode: "smoke", Runs: 1, Results: []Scenario{{Name: "fanout", Title: "1. Watch fan-out", Goals: []Goal{
		{Name: "met", Target: "≥ 3×", Met: true, Detail: "3.4×"},
		{Name: "missed", Target: "≥ 3×", Detail: "2.3×"},
		{Name: "reported", Detail: "1.5×"},
	}}}}
	md := r.markdown("../../benchmarks.md")
	for _, want := range []string{
		"| met | ≥ 3× | 3.4× | yes |",
		"| missed | ≥ 3× | 2.3× | **no** |",
		"| reported | — (reported) | 1.5× | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md has no line %q:\n%s", want, md)
		}
	}
}

func TestDocLink(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"/r/docs/benchmarks/full", "../../benchmarks.md"},
		{"/r/docs/benchmarks/full-ingest-3/fanout", "../../../benchmarks.md"},
		{"/tmp/informerd-bench-1", "docs/benchmarks.md"},
		{"/r/docs", "docs/benchmarks.md"},
	} {
		if got := docLink(tc.dir, "/r"); got != tc.want {
			t.Errorf("docLink(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}
