package e2e

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// specProgress reads e2e.test's verbose Ginkgo output (--ginkgo.v
// --ginkgo.no-color --ginkgo.silence-skips) and logs one line for each spec
// that ends, with its result, so a run of an hour shows where it is. Ginkgo
// prints a delimiter, then the spec's text, before each spec, and a line
// such as "• [FAILED] [1.234 seconds]" when it ends.
//
// Write is called by one goroutine at a time (exec's copy of the output).
type specProgress struct {
	run  string
	logf func(format string, args ...any)

	partial  []byte
	total    string // from "Will run 64 of 712 specs"
	done     int
	awaiting bool   // the line after a delimiter is the spec's text
	spec     string // the running spec
}

var (
	willRun   = regexp.MustCompile(`^Will run (\d+) of \d+ specs`)
	specEnded = regexp.MustCompile(`^(•|S|P)( \[([A-Z]+)\])?.* \[([0-9.]+) seconds\]$`)
)

// specDelimiter is the line Ginkgo prints before each spec.
const specDelimiter = "------------------------------"

func (p *specProgress) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(strings.TrimRight(string(p.partial[:i]), "\r"))
		p.partial = p.partial[i+1:]
	}
}

// flush reads a last line that did not end with a newline.
func (p *specProgress) flush() {
	if len(p.partial) > 0 {
		p.line(string(p.partial))
		p.partial = nil
	}
}

func (p *specProgress) line(line string) {
	switch {
	case line == specDelimiter:
		p.awaiting = true
	case p.awaiting && strings.TrimSpace(line) != "":
		p.spec, p.awaiting = specName(strings.TrimSpace(line)), false
	}
	if m := willRun.FindStringSubmatch(line); m != nil {
		p.total = m[1]
		p.logf("%s: specs to run: %s", p.run, p.total)
		return
	}
	m := specEnded.FindStringSubmatch(line)
	if m == nil || p.spec == "" {
		return
	}
	result := "passed"
	switch {
	case m[3] != "":
		result = strings.ToLower(m[3])
	case m[1] == "S":
		result = "skipped"
	}
	p.done++
	p.logf("%s: %d/%s %s (%ss) %s", p.run, p.done, p.total, result, m[4], p.spec)
	p.spec = ""
}

func TestSpecProgress(t *testing.T) {
	tests := []struct {
		name   string
		output string
		want   []string
	}{
		{
			name: "passed, failed and skipped at run time",
			output: "Will run 3 of 946 specs\n" +
				specDelimiter + "\n" +
				"[sig-api-machinery] Watchers should observe add [Conformance] [sig-api-machinery, Conformance]\n" +
				"k8s.io/kubernetes/test/e2e/apimachinery/watch.go:60\n" +
				"  STEP: Creating a kubernetes client @ 12/05/26 19:09:12.1\n" +
				"• [20.138 seconds]\n" +
				specDelimiter + "\n" +
				"[sig-api-machinery] ServerSideApply should work for CRDs [sig-api-machinery]\n" +
				"• [FAILED] [1.500 seconds]\n" +
				"[sig-api-machinery] ServerSideApply [It] should work for CRDs\n" +
				specDelimiter + "\n" +
				"[sig-api-machinery] Discovery should validate PreferredVersion [sig-api-machinery]\n" +
				"S [SKIPPED] [0.002 seconds]",
			want: []string{
				"direct: specs to run: 3",
				"direct: 1/3 passed (20.138s) Watchers should observe add [Conformance]",
				"direct: 2/3 failed (1.500s) ServerSideApply should work for CRDs",
				"direct: 3/3 skipped (0.002s) Discovery should validate PreferredVersion",
			},
		},
		{
			name:   "a line that only looks like a spec's end, outside a spec",
			output: "• [1.000 seconds]\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			p := &specProgress{run: "direct", logf: func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }}
			// Written in pieces that split lines, as a pipe delivers them.
			for chunk := range slices.Chunk([]byte(tt.output), 7) {
				if _, err := p.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			p.flush()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("logged lines (-want +got):\n%s", diff)
			}
		})
	}
}
