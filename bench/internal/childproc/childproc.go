// Package childproc is the protocol between the benchmark harness and its
// child processes: a child prints one JSON Report line when it is ready and
// runs until its stdin closes.
package childproc

import (
	"encoding/json"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
)

// Report is a child's ready line.
type Report struct {
	HeapLive float64 `json:"heapLive,omitempty"`
	Objects  int     `json:"objects,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// LiveHeap collects garbage and returns the heap live after it.
func LiveHeap() float64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64())
}

// Announce prints the ready line.
func Announce(r Report) { _ = json.NewEncoder(os.Stdout).Encode(r) }

// Ready prints the ready line and waits until the parent closes stdin.
func Ready(r Report) {
	Announce(r)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
