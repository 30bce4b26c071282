package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is what a run writes to results.json; results.md is made from it.
type Report struct {
	Mode     string     `json:"mode"`
	Command  string     `json:"command"`
	Machine  Machine    `json:"machine"`
	Started  time.Time  `json:"started"`
	Finished time.Time  `json:"finished"`
	Runs     int        `json:"runs"`
	Results  []Scenario `json:"scenarios"`
}

// Machine records where and with what the numbers were measured.
type Machine struct {
	Cores         int    `json:"cores"`
	MemoryBytes   uint64 `json:"memoryBytes"`
	CPUModel      string `json:"cpuModel"`
	GoVersion     string `json:"goVersion"`
	KubeAPIServer string `json:"kubeAPIServer"`
	Etcd          string `json:"etcd"`
	Commit        string `json:"commit"`
}

// Scenario is one benchmark's table, goals and notes.
type Scenario struct {
	Name    string   `json:"name"`
	Title   string   `json:"title"`
	Columns []string `json:"columns"` // value columns, in order
	Rows    []Row    `json:"rows"`
	// Plot is the column drawn in <name>.svg, one bar per row.
	Plot  string   `json:"plot"`
	Goals []Goal   `json:"goals,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Row is one configuration's measurements.
type Row struct {
	Labels []Label          `json:"labels"`
	Values map[string]*Stat `json:"values"`
}

// Label names a configuration: variant, watchers, phase…
type Label struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Stat is a value measured over repeated runs.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Runs   []float64 `json:"runs"`
}

// Goal is a target from an issue, checked against a ratio of medians; one
// with no Target is a ratio an issue asks to report, and Met says nothing.
type Goal struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
	Detail   string  `json:"detail"`
}

func newStat(runs []float64) *Stat {
	s := slices.Clone(runs)
	sort.Float64s(s)
	if len(s) == 0 {
		return &Stat{}
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &Stat{Median: med, Min: s[0], Max: s[len(s)-1], Runs: runs}
}

// table collects repeated measurements by row key and column.
type table struct {
	order  []string
	labels map[string][]Label
	values map[string]map[string][]float64
}

func newTable() *table {
	return &table{labels: map[string][]Label{}, values: map[string]map[string][]float64{}}
}

func (t *table) add(labels []Label, column string, v float64) {
	var key strings.Builder
	for _, l := range labels {
		key.WriteString(l.Name + "=" + l.Value + ";")
	}
	k := key.String()
	if _, ok := t.labels[k]; !ok {
		t.order = append(t.order, k)
		t.labels[k] = labels
		t.values[k] = map[string][]float64{}
	}
	t.values[k][column] = append(t.values[k][column], v)
}

func (t *table) rows() []Row {
	var rows []Row
	for _, k := range t.order {
		r := Row{Labels: t.labels[k], Values: map[string]*Stat{}}
		for col, vs := range t.values[k] {
			r.Values[col] = newStat(vs)
		}
		rows = append(rows, r)
	}
	return rows
}

// find returns the median of column in the row whose labels include all of
// match, and whether there is one.
func (s *Scenario) find(column string, match ...Label) (float64, bool) {
	if st, ok := s.stat(column, match...); ok {
		return st.Median, true
	}
	return 0, false
}

// stat returns the Stat of column in the row whose labels include all of
// match, and whether there is one.
func (s *Scenario) stat(column string, match ...Label) (*Stat, bool) {
	for _, r := range s.Rows {
		ok := true
		for _, m := range match {
			ok = ok && slices.Contains(r.Labels, m)
		}
		if st, has := r.Values[column]; ok && has {
			return st, true
		}
	}
	return nil, false
}

// ratios prints each run's values as ratios: "1.21×, 1.34×, 1.30×".
func (st *Stat) ratios() string {
	parts := make([]string, len(st.Runs))
	for i, v := range st.Runs {
		parts[i] = fmt.Sprintf("%.2f×", v)
	}
	return strings.Join(parts, ", ")
}

func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.markdown(docLink(dir, "."))), 0o644); err != nil {
		return err
	}
	return plots(r, dir)
}

// docLink is the path from dir to docs/benchmarks.md under root, the
// page that explains the scenarios: relative when dir is in root's
// docs/benchmarks, else that path from root.
func docLink(dir, root string) string {
	const fromRoot = "docs/benchmarks.md"
	abs, err1 := filepath.Abs(dir)
	doc, err2 := filepath.Abs(filepath.Join(root, fromRoot))
	if err1 != nil || err2 != nil || !strings.HasPrefix(abs, filepath.Dir(doc)+string(filepath.Separator)) {
		return fromRoot
	}
	rel, err := filepath.Rel(abs, doc)
	if err != nil {
		return fromRoot
	}
	return filepath.ToSlash(rel)
}

// markdown is the report; doc is the link to docs/benchmarks.md from
// where the report is written.
func (r *Report) markdown(doc string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark results (%s mode)\n\n", r.Mode)
	fmt.Fprintf(&b, "Generated by `%s` — do not edit; see [%s](%s) for what each scenario measures.\n\n", r.Command, doc, doc)
	m := r.Machine
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory\n", m.Cores, m.CPUModel, float64(m.MemoryBytes)/(1<<30))
	fmt.Fprintf(&b, "- versions: %s, kube-apiserver %s, etcd %s, informerd commit %s\n", m.GoVersion, m.KubeAPIServer, m.Etcd, m.Commit)
	fmt.Fprintf(&b, "- %s to %s (%v); each value is the median of %d runs, [min–max] the spread\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Finished.UTC().Format(time.RFC3339), r.Finished.Sub(r.Started).Round(time.Second), r.Runs)
	for _, s := range r.Results {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if len(s.Goals) > 0 {
			b.WriteString("| goal | target | measured | met |\n| --- | --- | --- | --- |\n")
			for _, g := range s.Goals {
				target, met := g.Target, "yes"
				switch {
				case target == "":
					target, met = "— (reported)", "—"
				case !g.Met:
					met = "**no**"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, target, g.Detail, met)
			}
			b.WriteString("\n")
		}
		if len(s.Rows) > 0 {
			var head []string
			for _, l := range s.Rows[0].Labels {
				head = append(head, l.Name)
			}
			head = append(head, s.Columns...)
			b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat(" --- |", len(head)) + "\n")
			for _, row := range s.Rows {
				var cells []string
				for _, l := range row.Labels {
					cells = append(cells, l.Value)
				}
				for _, c := range s.Columns {
					st, ok := row.Values[c]
					if !ok {
						cells = append(cells, "—")
						continue
					}
					cell := num(st.Median)
					if st.Min != st.Max {
						cell += fmt.Sprintf(" [%s–%s]", num(st.Min), num(st.Max))
					}
					cells = append(cells, cell)
				}
				b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			}
			b.WriteString("\n")
		}
		for _, n := range s.Notes {
			b.WriteString("- " + n + "\n")
		}
		if len(s.Notes) > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "![%s](%s.svg)\n\n", s.Title, s.Name)
	}
	return b.String()
}

// num prints a value with about three significant digits.
func num(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
