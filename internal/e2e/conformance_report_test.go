package e2e

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// specResult is one spec's outcome in one run: "passed", "failed" or
// "skipped" (also for a spec the focus left out), and the failure or skip
// message.
type specResult struct {
	result  string
	message string
}

// ran reports whether the spec was run, rather than left out by the focus.
func (r specResult) ran() bool { return r.result != "" && !(r.result == "skipped" && r.message == "") }

// junitReport is the part of Ginkgo's JUnit report (reporters.JUnitTestSuites)
// that says how each spec ended.
type junitReport struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnit returns each spec's result by its name (specName), and the
// suite-level nodes' failures under their own names ("[SynchronizedBeforeSuite]").
func readJUnit(path string) (map[string]specResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JUnit report: %w", err)
	}
	var report junitReport
	if err := xml.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("parse JUnit report %s: %w", path, err)
	}
	specs := map[string]specResult{}
	for _, suite := range report.Suites {
		for _, c := range suite.Cases {
			var r specResult
			switch c.Status {
			case "passed":
				r.result = "passed"
			case "skipped", "pending":
				r.result = "skipped"
				if c.Skipped != nil {
					r.message = strings.TrimPrefix(strings.TrimPrefix(c.Skipped.Message, "skipped"), " - ")
				}
			default: // failed, timedout, interrupted, aborted, panicked
				r.result = "failed"
				if c.Status != "failed" {
					r.result = c.Status
				}
				if c.Failure != nil {
					r.message = c.Failure.Message
				} else if c.Error != nil {
					r.message = c.Error.Message
				}
			}
			specs[specName(c.Name)] = r
		}
	}
	return specs, nil
}

// specLabels matches the labels Ginkgo appends to a spec's text: Kubernetes
// labels every spec with its SIG.
var specLabels = regexp.MustCompile(` \[sig-api-machinery(, [^\]]*)?\]$`)

// specName shortens a spec's full text as Ginkgo reports it, "[It]
// [sig-api-machinery] Watchers should ... [Conformance]
// [sig-api-machinery, Conformance]", to "Watchers should ... [Conformance]".
func specName(full string) string {
	name := strings.TrimPrefix(full, "[It] ")
	name = strings.TrimPrefix(name, "[sig-api-machinery] ")
	return specLabels.ReplaceAllString(name, "")
}

// conformanceRows is the report of two runs of the same specs.
type conformanceRows struct {
	focus             string
	direct, informerd conformanceRun
	rows              []conformanceRow
}

// conformanceRow is one spec's results in both runs.
type conformanceRow struct {
	name              string
	direct, informerd specResult
}

// conformanceReport pairs the runs' results by spec, in name order, leaving
// out the specs neither run ran.
func conformanceReport(focus string, direct, informerd conformanceRun) conformanceRows {
	report := conformanceRows{focus: focus, direct: direct, informerd: informerd}
	for _, run := range []conformanceRun{direct, informerd} {
		for name := range run.specs {
			if slices.ContainsFunc(report.rows, func(r conformanceRow) bool { return r.name == name }) {
				continue
			}
			row := conformanceRow{name: name, direct: direct.specs[name], informerd: informerd.specs[name]}
			if row.direct.ran() || row.informerd.ran() {
				report.rows = append(report.rows, row)
			}
		}
	}
	slices.SortFunc(report.rows, func(a, b conformanceRow) int { return strings.Compare(a.name, b.name) })
	return report
}

// regressions are the specs that pass against kube-apiserver and not
// through informerd.
func (c conformanceRows) regressions() []conformanceRow {
	var out []conformanceRow
	for _, row := range c.rows {
		if row.direct.result == "passed" && row.informerd.result != "passed" {
			out = append(out, row)
		}
	}
	return out
}

// markdown is report.md: counts, the table, and the first lines of each
// regression's failure.
func (c conformanceRows) markdown() string {
	var b bytes.Buffer
	b.WriteString("# Kubernetes' API-machinery e2e specs, directly and through informerd\n\n")
	fmt.Fprintf(&b, "Written by `make conformance` (internal/e2e TestConformance). Focus: `%s`; skip: `%s`.\n\n", c.focus, conformanceSkip)
	for _, run := range []conformanceRun{c.direct, c.informerd} {
		fmt.Fprintf(&b, "- %s: %s in %s\n", runTitle(run.name), c.counts(run.name), run.duration)
	}
	b.WriteString("\n| spec | kube-apiserver | through informerd |\n| --- | --- | --- |\n")
	for _, row := range c.rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(row.name), row.direct.result, row.informerd.result)
	}
	if regressions := c.regressions(); len(regressions) > 0 {
		b.WriteString("\n## Passing against kube-apiserver, failing through informerd\n")
		for _, row := range regressions {
			fmt.Fprintf(&b, "\n### %s\n\n```\n%s\n```\n", row.name, firstLines(row.informerd.message, 12))
		}
	}
	return b.String()
}

// counts says how many specs of a run passed, failed and were skipped.
func (c conformanceRows) counts(run string) string {
	n := map[string]int{}
	for _, row := range c.rows {
		r := row.direct
		if run == "informerd" {
			r = row.informerd
		}
		n[r.result]++
	}
	failed := len(c.rows) - n["passed"] - n["skipped"]
	return fmt.Sprintf("%d passed, %d failed, %d skipped", n["passed"], failed, n["skipped"])
}

func runTitle(run string) string {
	if run == "informerd" {
		return "through informerd"
	}
	return "against kube-apiserver"
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// firstLines is the first n non-empty lines of s, each at most 400 bytes.
func firstLines(s string, n int) string {
	var out []string
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(line) > 400 {
			line = line[:400] + "…"
		}
		if out = append(out, line); len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n")
}
