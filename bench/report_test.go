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
	md := r.markdown()
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
