package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/reflector"
	"github.com/informerd/informerd/internal/state"
)

// resource is one resource's state in a memory returner test: whether it
// synced, its cache's resourceVersion, the last one from upstream, and
// its relists.
type resource struct {
	synced            bool
	cacheRV, upstream string
	relists           int64
}

func reports(rs ...resource) []pipeline.Report {
	out := make([]pipeline.Report, len(rs))
	for i, r := range rs {
		sig := &reflector.Signals{}
		sig.Relists.Store(r.relists)
		sig.LastResourceVersion.Store(r.upstream)
		out[i] = pipeline.Report{Status: pipeline.Status{Cache: indexer.Stats{Synced: r.synced, ResourceVersion: r.cacheRV}}, Upstream: sig}
	}
	return out
}

// dueStep is one poll of a memory returner: the reports it reads, and
// the reason it should give to return memory ("" for none).
type dueStep struct {
	name    string
	reports []pipeline.Report
	want    string
}

// checkDue polls m with each step's reports in turn.
func checkDue(t *testing.T, m *memoryReturner, steps []dueStep) {
	t.Helper()
	for _, s := range steps {
		if got := m.due(s.reports); got != s.want {
			t.Errorf("%s: due = %q, want %q", s.name, got, s.want)
		}
	}
}

// TestMemoryReturnerDue: memory is returned once every resource has
// synced, once after each relist, and only once the relist's list is in
// the cache.
func TestMemoryReturnerDue(t *testing.T) {
	steps := []dueStep{
		{"one resource still syncing", reports(resource{true, "10", "10", 1}, resource{false, "", "", 0}), ""},
		{"both synced, first seen", reports(resource{true, "10", "10", 1}, resource{true, "20", "20", 1}), ""},
		{"both synced, held for a poll", reports(resource{true, "10", "10", 1}, resource{true, "20", "20", 1}), "initial sync"},
		{"nothing new", reports(resource{true, "12", "12", 1}, resource{true, "20", "20", 1}), ""},
		{"a relist, first seen", reports(resource{true, "12", "30", 2}, resource{true, "20", "20", 1}), ""},
		{"the relist not in the cache yet", reports(resource{true, "12", "31", 2}, resource{true, "20", "20", 1}), ""},
		{"the relist in the cache", reports(resource{true, "30", "31", 2}, resource{true, "20", "20", 1}), "relist"},
		{"nothing new after it", reports(resource{true, "31", "31", 2}, resource{true, "20", "20", 1}), ""},
		{"two relists at once count once", reports(resource{true, "31", "40", 3}, resource{true, "20", "41", 2}), ""},
		{"in the cache", reports(resource{true, "40", "40", 3}, resource{true, "41", "41", 2}), "relist"},
	}
	checkDue(t, newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler)), steps)
}

// TestMemoryReturnerCompression: once the cached objects' stored bytes
// have fallen by a quarter and 16 MiB since the last return (cold objects
// compressed) and held for a poll, the memory they held is returned, once.
func TestMemoryReturnerCompression(t *testing.T) {
	const mib = 1 << 20
	at := func(stored int64) []pipeline.Report {
		r := reports(resource{true, "10", "10", 1})
		r[0].Cache.StoredBytes = stored
		return r
	}
	steps := []dueStep{
		{"synced, first seen", at(100 * mib), ""},
		{"synced, held", at(100 * mib), "initial sync"},
		{"cooling: fallen, still falling", at(60 * mib), ""},
		{"fallen and held within 1% (churn)", at(60*mib + 300<<10), "compression"},
		{"held again: nothing new", at(60 * mib), ""},
		{"a small fall", at(50 * mib), ""},
		{"a small fall, held: under a quarter", at(50 * mib), ""},
		{"grown back", at(90 * mib), ""},
		{"a fall of a quarter but under 16 MiB", at(45 * mib), ""},
		{"held, still under 16 MiB", at(45 * mib), ""},
		{"a fall of 20 MiB, a third", at(40 * mib), ""},
		{"held", at(40 * mib), "compression"},
	}
	checkDue(t, newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler)), steps)
}

// TestMemoryReturnerStateWrite: a large whole-state write (--state-dir)
// that ends after the first return has let go of its checkpoint's
// objects; that memory is returned, once per write. A small state's write
// is not worth a collection of its own.
func TestMemoryReturnerStateWrite(t *testing.T) {
	const big = 64 << 20
	at := func(full int64) []pipeline.Report {
		r := reports(resource{true, "10", "10", 1}, resource{true, "20", "20", 1})
		r[0].Configured, r[1].Configured = "pods", "configmaps"
		r[0].State = &state.Stats{FullWrites: full, Bytes: big}
		r[1].State = &state.Stats{FullWrites: full, Bytes: 1 << 20}
		return r
	}
	small := func(full int64) []pipeline.Report {
		r := at(1)
		r[1].State.FullWrites = full
		return r
	}
	steps := []dueStep{
		{"synced, first seen, writing", at(0), ""},
		{"synced, held", at(0), "initial sync"},
		{"still writing", at(0), ""},
		{"written", at(1), "state write"},
		{"nothing new", at(1), ""},
		{"another full write (the writer fell behind)", at(2), "state write"},
		{"nothing new after it", at(2), ""},
	}
	checkDue(t, newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler)), steps)
	// Only the small state written: no return.
	steps = []dueStep{
		{"synced, first seen", small(0), ""},
		{"synced, held", small(0), "initial sync"},
		{"the small state written", small(1), ""},
		{"written again", small(2), ""},
	}
	checkDue(t, newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler)), steps)
	// A write that ended before the first return is covered by it.
	m := newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler))
	for i, want := range []string{"", "initial sync", ""} {
		if got := m.due(at(1)); got != want {
			t.Errorf("written before the sync's return, poll %d: due = %q, want %q", i, got, want)
		}
	}
}

// TestMemoryReturnerRestored: a cache restored from --state-dir that
// resumed its watch has made no list; it is returned after once.
func TestMemoryReturnerRestored(t *testing.T) {
	m := newMemoryReturner(nil, time.Second, slog.New(slog.DiscardHandler))
	restored := []pipeline.Report{{Status: pipeline.Status{Cache: indexer.Stats{Synced: true, ResourceVersion: "7"}}}}
	var got []string
	for range 4 {
		got = append(got, m.due(restored))
	}
	if want := []string{"", "initial sync", "", ""}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("due over 4 polls = %q, want %q", got, want)
	}
}

// fakeCaches is a reporter whose reports a test sets.
type fakeCaches struct {
	mu sync.Mutex
	rs []pipeline.Report
}

func (f *fakeCaches) Progress() []pipeline.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rs
}

func (f *fakeCaches) set(rs []pipeline.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rs = rs
}

// TestMemoryReturnerRun: Run returns memory once per list however long it
// polls, logs it, and returns when its context ends.
func TestMemoryReturnerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caches := &fakeCaches{}
		caches.set(reports(resource{false, "", "", 0}))
		var log bytes.Buffer
		m := newMemoryReturner(caches, time.Second, slog.New(slog.NewTextHandler(&log, nil)))
		var freed int
		m.free = func() { freed++ }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()

		time.Sleep(5 * time.Second)
		caches.set(reports(resource{true, "10", "10", 1}))
		time.Sleep(time.Minute)
		synctest.Wait()
		if freed != 1 {
			t.Errorf("after the sync and a minute: %d returns, want 1", freed)
		}
		caches.set(reports(resource{true, "20", "20", 2}))
		time.Sleep(time.Minute)
		synctest.Wait()
		if freed != 2 {
			t.Errorf("after a relist and a minute: %d returns, want 2", freed)
		}
		for _, want := range []string{"after=\"initial sync\"", "after=relist", "returnedBytes=", "heapLiveBytes="} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the log has no %s:\n%s", want, log.String())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

// TestTuneRuntime: the flags set GOGC and the soft memory limit from the
// cgroup unless the environment sets them, and the log says which.
func TestTuneRuntime(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{
		"proc/self/cgroup":         "0::/\n",
		"proc/self/mountinfo":      "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"sys/fs/cgroup/memory.max": "1073741824\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The runtime's settings are the process's: put them back.
	gc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(gc); debug.SetMemoryLimit(limit) })
	tests := []struct {
		name      string
		env       map[string]string
		wantGC    int
		wantLimit int64
		wantLog   []string
	}{
		{name: "from the flags and the cgroup", wantGC: 42, wantLimit: 1 << 29,
			wantLog: []string{"gcPercentFrom=--gc-percent", "limitFrom=\"cgroup v2\"", "limitBytes=536870912", "cgroupLimitBytes=1073741824"}},
		{name: "GOGC and GOMEMLIMIT set by the user", env: map[string]string{"GOGC": "200", "GOMEMLIMIT": "300MiB"}, wantGC: 77, wantLimit: 12345,
			wantLog: []string{"gcPercentFrom=GOGC", "limitFrom=GOMEMLIMIT", "limitBytes=12345"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			// What the runtime read from the environment at start.
			debug.SetGCPercent(77)
			debug.SetMemoryLimit(12345)
			var log bytes.Buffer
			tuneRuntime(memoryOptions{limitRatio: 0.5, gcPercent: 42}, root, slog.New(slog.NewTextHandler(&log, nil)))
			if got := debug.SetGCPercent(-1); got != tc.wantGC {
				t.Errorf("GC percent %d, want %d", got, tc.wantGC)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the log has no %s:\n%s", want, log.String())
				}
			}
		})
	}
}
