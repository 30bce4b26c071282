package main

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// profileOf builds a profile whose samples have the given stacks
// (innermost function first) and values of sampleType: a CPU profile's
// ("cpu", nanoseconds) or an allocation profile's ("alloc_space", bytes).
func profileOf(t *testing.T, sampleType string, samples map[int64][]string) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	if sampleType == "alloc_space" {
		p.SampleType = []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}
		p.PeriodType = &profile.ValueType{Type: "space", Unit: "bytes"}
		p.Period = 512 << 10
	}
	funcs := map[string]*profile.Function{}
	for ns, stack := range samples {
		var locs []*profile.Location
		for _, name := range stack {
			f, ok := funcs[name]
			if !ok {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{1, ns}})
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestProfileShare(t *testing.T) {
	cpu := profileOf(t, "cpu", map[int64][]string{
		// Serving: a frame deep in the stack matches.
		30: {"syscall.write", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"},
		10: {"github.com/informerd/informerd/internal/server.(*Server).Watch", "google.golang.org/grpc.(*Server).handleStream"},
		// Not serving: ingest and the collector.
		40: {"github.com/buger/jsonparser.blockEndConfig", "github.com/informerd/informerd/internal/reflector.(*Reflector).Run"},
		20: {"runtime.gcDrain", "runtime.gcBgMarkWorker"},
	})
	allocs := profileOf(t, "alloc_space", map[int64][]string{
		1 << 20: {"runtime.mallocgc", "github.com/informerd/informerd/internal/fanout.(*Watcher).deliver"},
		3 << 20: {"runtime.mallocgc", "github.com/informerd/informerd/internal/reflector.(*Reflector).Run"},
	})
	// The Kubernetes API over HTTP/1.1: the watch handler writes to the
	// connection itself; its list handler and the metrics server are not
	// serving watches.
	kubeCPU := profileOf(t, "cpu", map[int64][]string{
		30: {"syscall.write", "net/http.(*response).FlushError", "github.com/informerd/informerd/internal/kubeapi.(*eventWriter).flush", "github.com/informerd/informerd/internal/kubeapi.(*Handler).watch", "net/http.(*conn).serve"},
		10: {"github.com/informerd/informerd/internal/fanout.(*Hub).OnEvent", "github.com/informerd/informerd/internal/pipeline.(*Pipeline).Run"},
		25: {"github.com/informerd/informerd/internal/kubeapi.(*Handler).list", "net/http.(*conn).serve"},
		35: {"github.com/prometheus/client_golang/prometheus.(*Registry).Gather", "net/http.(*conn).serve"},
	})
	for _, tt := range []struct {
		name       string
		data       []byte
		sampleType string
		prefixes   []string
		want       float64
	}{
		{"serving CPU", cpu, "cpu", informerdServing, 0.4},
		{"serving CPU on the Kubernetes API", kubeCPU, "cpu", kubeAPIServing, 0.4},
		{"the collector's CPU", cpu, "cpu", gcWorkers, 0.2},
		{"serving allocations", allocs, "alloc_space", informerdServing, 0.25},
	} {
		got, err := profileShare(tt.data, tt.sampleType, tt.prefixes)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: share = %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, err := profileShare([]byte("not a profile"), "cpu", informerdServing); err == nil {
		t.Error("profileShare of garbage: no error")
	}
	if _, err := profileShare(profileOf(t, "alloc_space", nil), "alloc_space", informerdServing); !errors.Is(err, errNoSamples) {
		t.Errorf("profileShare of a profile without samples: %v, want errNoSamples", err)
	}
	if _, err := profileShare(allocs, "cpu", informerdServing); err == nil {
		t.Error("profileShare of an allocation profile for cpu: no error")
	}
}

func TestServingWithGC(t *testing.T) {
	// 40% serving, 20% the collector, a quarter of the bytes allocated
	// serving: the collector's work for them, 5%, is serving too.
	p := profiled{serving: 0.4, gc: 0.2, servingAllocs: 0.25}
	if got, want := p.servingWithGC(), 0.45; math.Abs(got-want) > 1e-9 {
		t.Errorf("servingWithGC = %v, want %v", got, want)
	}
	if got := (profiled{serving: 0.4, gc: 0.2, servingAllocs: math.NaN()}).servingWithGC(); !math.IsNaN(got) {
		t.Errorf("servingWithGC without an allocation profile = %v, want NaN", got)
	}
}
