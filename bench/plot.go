package main

import (
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plots draws each scenario's Plot column as a bar chart, one bar per row.
func plots(r *Report, dir string) error {
	for _, s := range r.Results {
		if s.Plot == "" || len(s.Rows) == 0 {
			continue
		}
		var values plotter.Values
		var names []string
		for _, row := range s.Rows {
			st, ok := row.Values[s.Plot]
			if !ok {
				continue
			}
			values = append(values, st.Median)
			var parts []string
			for _, l := range row.Labels {
				parts = append(parts, l.Value)
			}
			names = append(names, strings.Join(parts, "\n"))
		}
		p := plot.New()
		p.Title.Text = s.Title
		p.Y.Label.Text = s.Plot
		bars, err := plotter.NewBarChart(values, vg.Points(14))
		if err != nil {
			return err
		}
		p.Add(bars)
		p.NominalX(names...)
		width := vg.Length(len(names))*vg.Points(60) + vg.Points(120)
		if err := p.Save(width, 4*vg.Inch, filepath.Join(dir, s.Name+".svg")); err != nil {
			return err
		}
	}
	return nil
}
