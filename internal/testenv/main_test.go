package testenv

import "testing"

func TestNeedsControlPlane(t *testing.T) {
	tests := []struct {
		name              string
		run, bench, fuzz  string
		worker, wantStart bool
	}{
		{name: "plain go test", wantStart: true},
		{name: "go test -run X", run: "X", wantStart: true},
		{name: "seed corpus of fuzz targets as tests", run: "Fuzz", wantStart: true},
		{name: "benchmarks", run: "^$", bench: ".", wantStart: true},
		{name: "fuzz after the tests", fuzz: "^FuzzX$", wantStart: true},
		{name: "fuzz coordinator, no tests", run: "^$", fuzz: "^FuzzX$"},
		{name: "fuzz coordinator with benchmarks", run: "^$", bench: ".", fuzz: "^FuzzX$", wantStart: true},
		{name: "fuzz worker", fuzz: "^FuzzX$", worker: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsControlPlane(tt.run, tt.bench, tt.fuzz, tt.worker); got != tt.wantStart {
				t.Errorf("needsControlPlane(run %q, bench %q, fuzz %q, worker %v) = %v, want %v", tt.run, tt.bench, tt.fuzz, tt.worker, got, tt.wantStart)
			}
		})
	}
}
