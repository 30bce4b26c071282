// Command tracewait reads a Go execution trace of informerd (the capacity
// scenario writes capacity-kubeapi-trace.pprof with -profile) and prints
// where its Kubernetes API watch handlers wait, as distributions (p50,
// p90, p99, p99.9, max), which a CPU profile cannot show:
//
//   - scheduling latency: from a goroutine made runnable (a watch handler
//     woken by the fan-out) to it running;
//   - blocked: each stretch a watch handler spent blocked, by where it
//     blocked; "flush" is HTTP/2's writeDataFromHandler, a flush waiting
//     for the connection's writer to take its frame;
//   - stop-the-world pauses.
//
// Usage: go run ./bench/tracewait capacity-kubeapi-trace.pprof
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracewait TRACE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracewait:", err)
		os.Exit(1)
	}
	defer f.Close()
	w, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracewait:", err)
		os.Exit(1)
	}
	w.print(os.Stdout)
}

// waits are the distributions read from one trace.
type waits struct {
	schedHandlers, schedOthers, stw []time.Duration
	blocked                         map[string][]time.Duration
	gcs                             int
}

// goroutine is what read keeps of one goroutine.
type goroutine struct {
	runnableAt, blockedAt trace.Time
	blockedIn             string
	handler               bool // seen blocking inside a watch handler
}

const watchHandler = "kubeapi.(*Handler).watch"

func read(r io.Reader) (*waits, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	w := &waits{blocked: map[string][]time.Duration{}}
	gs := map[trace.GoID]*goroutine{}
	var stwStart trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			return w, nil
		}
		if err != nil {
			return nil, err
		}
		switch ev.Kind() {
		case trace.EventRangeBegin:
			switch name := ev.Range().Name; {
			case strings.Contains(name, "stop-the-world"):
				stwStart = ev.Time()
			case name == "GC concurrent mark phase":
				w.gcs++
			}
		case trace.EventRangeEnd:
			if strings.Contains(ev.Range().Name, "stop-the-world") && stwStart != 0 {
				w.stw = append(w.stw, time.Duration(ev.Time()-stwStart))
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			g := gs[id]
			if g == nil {
				g = &goroutine{}
				gs[id] = g
			}
			from, to := st.Goroutine()
			switch {
			case to == trace.GoWaiting || to == trace.GoSyscall:
				if has(st.Stack, watchHandler) {
					g.handler = true
				}
				g.blockedAt, g.blockedIn = ev.Time(), where(st.Stack)
			case to == trace.GoRunnable:
				if g.handler && g.blockedAt != 0 && (from == trace.GoWaiting || from == trace.GoSyscall) {
					w.blocked[g.blockedIn] = append(w.blocked[g.blockedIn], time.Duration(ev.Time()-g.blockedAt))
				}
				g.runnableAt = ev.Time()
			case to == trace.GoRunning && from == trace.GoRunnable && g.runnableAt != 0:
				d := time.Duration(ev.Time() - g.runnableAt)
				if g.handler {
					w.schedHandlers = append(w.schedHandlers, d)
				} else {
					w.schedOthers = append(w.schedOthers, d)
				}
			}
		}
	}
}

// where names the place a goroutine blocked at.
func where(s trace.Stack) string {
	switch {
	case has(s, "writeDataFromHandler"):
		return "flush (HTTP/2 writeDataFromHandler)"
	case has(s, watchHandler) && has(s, "runtime.selectgo"):
		return "watch loop, waiting for an event"
	}
	var fns []string
	for f := range s.Frames() {
		fns = append(fns, f.Func)
		if len(fns) == 3 {
			break
		}
	}
	if len(fns) == 0 {
		return "(no stack)"
	}
	return strings.Join(fns, " < ")
}

func has(s trace.Stack, fn string) bool {
	for f := range s.Frames() {
		if strings.Contains(f.Func, fn) {
			return true
		}
	}
	return false
}

func (w *waits) print(out io.Writer) {
	line := func(name string, d []time.Duration) {
		slices.Sort(d)
		at := func(p float64) time.Duration {
			if len(d) == 0 {
				return 0
			}
			return d[min(len(d)-1, int(float64(len(d))*p/100))]
		}
		fmt.Fprintf(out, "%-60.60s n=%7d  p50 %10v  p90 %10v  p99 %10v  p99.9 %10v  max %10v\n",
			name, len(d), at(50), at(90), at(99), at(99.9), at(100))
	}
	line("scheduling latency, watch handlers", w.schedHandlers)
	line("scheduling latency, other goroutines", w.schedOthers)
	line("stop-the-world pauses", w.stw)
	fmt.Fprintf(out, "GC cycles started: %d\n", w.gcs)
	keys := make([]string, 0, len(w.blocked))
	for k := range w.blocked {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(w.blocked[b]) - len(w.blocked[a]) })
	for _, k := range keys[:min(10, len(keys))] {
		line("watch handlers blocked: "+k, w.blocked[k])
	}
}
