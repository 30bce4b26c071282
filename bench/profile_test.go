package main

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// cpuProfileOf builds a CPU profile whose samples have the given stacks
// (innermost function first) and CPU nanoseconds.
func cpuProfileOf(t *testing.T, samples map[int64][]string) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
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

func TestServingShare(t *testing.T) {
	data := cpuProfileOf(t, map[int64][]string{
		// Serving: a frame deep in the stack matches.
		30: {"syscall.write", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"},
		10: {"github.com/informerd/informerd/internal/server.(*Server).Watch", "google.golang.org/grpc.(*Server).handleStream"},
		// Not serving: ingest and the collector.
		40: {"github.com/buger/jsonparser.blockEndConfig", "github.com/informerd/informerd/internal/reflector.(*Reflector).Run"},
		20: {"runtime.gcDrain", "runtime.gcBgMarkWorker"},
	})
	got, err := servingShare(data, informerdServing)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.4; math.Abs(got-want) > 1e-9 {
		t.Errorf("serving share = %v, want %v", got, want)
	}
	if _, err := servingShare([]byte("not a profile"), informerdServing); err == nil {
		t.Error("servingShare of garbage: no error")
	}
	empty := cpuProfileOf(t, map[int64][]string{})
	if _, err := servingShare(empty, informerdServing); err == nil {
		t.Error("servingShare of a profile without samples: no error")
	}
}
