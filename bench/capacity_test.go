package main

import (
	"math"
	"testing"
)

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	bounds := []float64{0.001, 0.004, 0.016, inf}
	for _, tc := range []struct {
		name   string
		counts []float64
		q      float64
		want   float64
	}{
		{"none", []float64{0, 0, 0, 0}, 0.99, -1},
		{"all in the first bucket", []float64{100, 100, 100, 100}, 0.99, 0.00099},
		{"halfway through the second", []float64{0, 100, 100, 100}, 0.5, 0.0025},
		{"beyond the last bound", []float64{0, 0, 0, 100}, 0.99, 0.016},
		{"the last finite bucket", []float64{50, 50, 100, 100}, 0.99, 0.004 + 0.012*0.98},
	} {
		if got := bucketQuantile(tc.q, bounds, tc.counts); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: q%g = %g, want %g", tc.name, tc.q, got, tc.want)
		}
	}
}
