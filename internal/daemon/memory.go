package daemon

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/informerd/informerd/internal/memlimit"
	"github.com/informerd/informerd/internal/pipeline"
)

// Defaults of the memory flags (docs/configuration.md explains them with
// the benchmark's figures).
const (
	// DefaultMemoryLimitRatio is the share of the container's cgroup
	// memory limit given to the Go runtime as its soft limit: the rest
	// is room for what the runtime does not count (the binary, thread
	// stacks outside the heap) and for a moment over the soft limit.
	DefaultMemoryLimitRatio = 0.9
	// DefaultGCPercent is informerd's GOGC: the heap may grow by half the
	// live heap between collections, not by all of it, so that the
	// resident memory of a large cache stays near the cache's size.
	DefaultGCPercent = 50
	// DefaultReturnMemory returns the memory a full list leaves behind to
	// the OS once the list is in the cache.
	DefaultReturnMemory = true
)

// memoryPollInterval is how often the memory returner reads the caches'
// state: cheap (a counter and a flag per resource), and soon enough
// after a list that the memory it leaves is returned before it is reused.
const memoryPollInterval = time.Second

// tuneRuntime sets the Go runtime's GC percent and soft memory limit from
// the flags in o and the cgroup files under root, unless the environment sets GOGC or
// GOMEMLIMIT, and logs what it chose and where it came from.
func tuneRuntime(o memoryOptions, root string, log *slog.Logger) {
	gogc := "GOGC"
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(o.gcPercent)
		gogc = "--gc-percent"
	}
	limit, err := memlimit.Choose(root, o.limitRatio, os.Getenv("GOMEMLIMIT"))
	if err != nil {
		log.Warn("cannot read the cgroup's memory limit; the Go runtime runs without a soft memory limit (set GOMEMLIMIT to give it one)", "err", err)
	}
	if limit.Bytes > 0 {
		debug.SetMemoryLimit(limit.Bytes)
	}
	// Read back: what the runtime uses, whoever set it.
	gcPercent := debug.SetGCPercent(-1)
	debug.SetGCPercent(gcPercent)
	attrs := []any{"gcPercent", gcPercent, "gcPercentFrom", gogc, "limitFrom", limit.Source}
	if l := debug.SetMemoryLimit(-1); l < 1<<62 {
		attrs = append(attrs, "limitBytes", l)
	}
	if limit.File != "" {
		attrs = append(attrs, "cgroupLimitBytes", limit.Cgroup, "cgroupFile", limit.File, "ratio", o.limitRatio)
	}
	log.Info("Go runtime memory settings", attrs...)
}

// reporter is what the memory returner reads once a second: each
// resource's cache figures and upstream counters, without visiting its
// watchers (pipeline.Set.Progress). *pipeline.Set is one.
type reporter interface {
	Progress() []pipeline.Report
}

// memoryReturner returns to the OS, once, the memory that a full list
// leaves behind when its objects are in the cache: after every resource
// has synced for the first time, and after each relist. A list's garbage
// (the decoded list, the objects it replaced) is freed by the next
// collection, but Go's background scavenger gives the pages back to the
// kernel only slowly, so without this the process's RSS stays near the
// list's peak. It is not a loop of FreeOSMemory: one call per list.
//
// Run is called once; it polls the caches' reports, which every method of
// a pipeline.Set allows concurrently.
type memoryReturner struct {
	caches reporter
	log    *slog.Logger
	every  time.Duration
	// free is debug.FreeOSMemory; a test counts calls.
	free func()

	returned bool  // after the first sync
	relists  int64 // the relists returned after
	// pending is the relist count first seen and each resource's last
	// upstream resourceVersion then; the return waits until the count
	// has held for a poll and every cache has caught up to those
	// resourceVersions (the list is applied, its garbage unreferenced).
	pending    int64
	pendingRVs []uint64
	// storedAtReturn is the caches' stored bytes at the last return;
	// lastStored at the last poll. Compressing cold objects
	// (--cache-compression) frees their JSON after the list's return: once
	// the stored bytes have fallen by compressedReturn and held for a
	// poll (within 1%), that memory is returned too.
	storedAtReturn, lastStored int64
	// fullWrites is each resource's whole-state writes (--state-dir), by
	// its configured name, at the last return. A full write holds the
	// objects of its checkpoint until it has written them, after the
	// list's return and the compression's: once a large one ends (a state
	// of compressedReturnBytes or more), what it held is returned too.
	// Smaller ones wait for the next return.
	fullWrites map[string]int64
}

// compressedReturn is how far the cached objects' stored bytes must fall,
// in bytes and in share, before the memory they held is returned.
const (
	compressedReturnBytes = 16 << 20
	compressedReturnShare = 0.25
)

// newMemoryReturner returns a returner of the memory caches' lists leave,
// polling every interval.
func newMemoryReturner(caches reporter, every time.Duration, log *slog.Logger) *memoryReturner {
	return &memoryReturner{caches: caches, log: log, every: every, free: debug.FreeOSMemory, pending: -1}
}

// Run polls until ctx ends and returns nil.
func (m *memoryReturner) Run(ctx context.Context) error {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if reason := m.due(m.caches.Progress()); reason != "" {
				m.release(reason)
			}
		}
	}
}

// due says why memory should be returned now ("initial sync", "relist"),
// or "" when it should not.
func (m *memoryReturner) due(reports []pipeline.Report) string {
	var relists, stored int64
	written := false // a large whole-state write ended since the last return
	cacheRVs := make([]uint64, len(reports))
	upstreamRVs := make([]uint64, len(reports))
	for i, r := range reports {
		if !r.Cache.Synced {
			return ""
		}
		cacheRVs[i] = parseRV(r.Cache.ResourceVersion)
		stored += r.Cache.StoredBytes
		if r.State != nil && r.State.FullWrites > m.fullWrites[r.Configured] && r.State.Bytes >= compressedReturnBytes {
			written = true
		}
		if r.Upstream != nil {
			relists += r.Upstream.Relists.Load()
			rv, _ := r.Upstream.LastResourceVersion.Load().(string)
			upstreamRVs[i] = parseRV(rv)
		}
	}
	// Settled: within 1% of the last poll, so that churn, which changes
	// the stored bytes a little at every poll, does not defer the return.
	settled := math.Abs(float64(stored-m.lastStored)) <= 0.01*float64(m.lastStored)
	m.lastStored = stored
	if m.returned && relists == m.relists {
		fell := m.storedAtReturn - stored
		if settled && fell >= compressedReturnBytes && float64(fell) >= compressedReturnShare*float64(m.storedAtReturn) {
			m.storedAtReturn = stored
			m.noteWrites(reports)
			return "compression"
		}
		if written {
			m.storedAtReturn = stored
			m.noteWrites(reports)
			return "state write"
		}
		return ""
	}
	if relists != m.pending {
		m.pending, m.pendingRVs = relists, upstreamRVs
		return ""
	}
	for i, rv := range m.pendingRVs {
		if cacheRVs[i] < rv {
			return ""
		}
	}
	reason := "relist"
	if !m.returned {
		reason = "initial sync"
	}
	m.returned, m.relists, m.pending, m.storedAtReturn = true, relists, -1, stored
	m.noteWrites(reports)
	return reason
}

// noteWrites records each resource's whole-state writes at a return.
func (m *memoryReturner) noteWrites(reports []pipeline.Report) {
	m.fullWrites = make(map[string]int64, len(reports))
	for _, r := range reports {
		if r.State != nil {
			m.fullWrites[r.Configured] = r.State.FullWrites
		}
	}
}

// parseRV reads a resourceVersion as a number; 0 for one that is not.
func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// memoryFigures are read before and after a return.
var memoryFigures = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/heap/live:bytes",
}

// release collects garbage, returns the free memory to the OS and logs
// what it returned: the memory the runtime holds from the OS and not
// released, before and after, and the live heap.
func (m *memoryReturner) release(reason string) {
	before := readMemory()
	start := time.Now()
	m.free()
	took := time.Since(start)
	after := readMemory()
	m.log.Info("returned free memory to the OS", "after", reason,
		"returnedBytes", int64(before.retained)-int64(after.retained),
		"retainedBytes", after.retained, "heapLiveBytes", after.live, "took", took)
}

// memoryRead is what readMemory reads: retained is the memory the Go
// runtime has mapped and not released to the OS (close to its share of
// RSS), live the heap live after the last collection.
type memoryRead struct{ retained, live uint64 }

func readMemory() memoryRead {
	s := make([]metrics.Sample, len(memoryFigures))
	for i, name := range memoryFigures {
		s[i].Name = name
	}
	metrics.Read(s)
	return memoryRead{retained: s[0].Value.Uint64() - s[1].Value.Uint64(), live: s[2].Value.Uint64()}
}
