package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// footprint is a cache process's memory at one point of its life.
type footprint struct {
	// peak is VmHWM: the largest RSS since the process started or since
	// its peak was last reset; 0 when not read.
	peak float64
	// rss is VmRSS, read before the forced GC of heap.
	rss float64
	// heap is the Go heap live after a forced GC.
	heap float64
	// anon is RssAnon: the RSS of the process's own memory, without the
	// pages of mapped files (a --state-dir's bbolt file), read with rss.
	anon float64
}

// cacheProc is a process caching the pods of a namespace whose memory the
// memory scenario follows through its life: informerd or the client-go
// informer child.
type cacheProc struct {
	name string
	pid  int
	// heap forces a GC and returns the heap live after it.
	heap func(context.Context) (float64, error)
	// progress is a counter that grows by at least relisted once the
	// process has relisted: informerd's relists, or the notifications of
	// the client-go informer's handlers (one per object a relist returns).
	progress func(context.Context) (float64, error)
	relisted float64
}

// informerdProc follows d, which caches the pods of one namespace.
func informerdProc(d *daemon) *cacheProc {
	return &cacheProc{
		name: "informerd",
		pid:  d.pid,
		heap: d.liveHeap,
		progress: func(ctx context.Context) (float64, error) {
			s, err := scrape(ctx, d.metricsURL)
			if err != nil {
				return 0, err
			}
			return s.sum("informerd_upstream_relists_total", map[string]string{"resource": "pods"}), nil
		},
		relisted: 1,
	}
}

// informerProc follows a client-go informer child caching pods objects.
func informerProc(c *child, pods int) *cacheProc {
	number := func(command string) func(context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			line, err := c.ask(ctx, command)
			if err != nil {
				return 0, err
			}
			return strconv.ParseFloat(strings.TrimSpace(line), 64)
		}
	}
	return &cacheProc{name: "client-go informer", pid: c.pid(), heap: number("heap"), progress: number("count"), relisted: float64(pods)}
}

// measure reads p's RSS, then its live heap, and with peak its VmHWM.
func (p *cacheProc) measure(ctx context.Context, peak bool) (footprint, error) {
	var f footprint
	rss, err := rssBytes(p.pid)
	if err != nil {
		return f, fmt.Errorf("%s's RSS: %w", p.name, err)
	}
	f.rss = float64(rss)
	anon, err := procStatusBytes(p.pid, "RssAnon")
	if err != nil {
		return f, fmt.Errorf("%s's anonymous RSS: %w", p.name, err)
	}
	f.anon = float64(anon)
	if peak {
		hwm, err := peakRSSBytes(p.pid)
		if err != nil {
			return f, fmt.Errorf("%s's peak RSS: %w", p.name, err)
		}
		f.peak = float64(hwm)
	}
	if f.heap, err = p.heap(ctx); err != nil {
		return f, fmt.Errorf("%s's live heap: %w", p.name, err)
	}
	return f, nil
}

// measureAll measures every process.
func measureAll(ctx context.Context, procs []*cacheProc, peak bool) ([]footprint, error) {
	out := make([]footprint, len(procs))
	for i, p := range procs {
		var err error
		if out[i], err = p.measure(ctx, peak); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// forceRelist makes every upstream watch of procs relist, as after an
// outage long enough for etcd to compact: it kills kube-apiserver,
// compacts etcd while it is down, starts it again and waits until each
// process has relisted. It resets each process's peak RSS first, so that
// their VmHWM is the peak of the relist. It returns whether the peaks
// could be reset (else they are the peaks since each process started).
func forceRelist(ctx context.Context, b *bench, procs []*cacheProc) (reset bool, err error) {
	before := make([]float64, len(procs))
	for i, p := range procs {
		if before[i], err = p.progress(ctx); err != nil {
			return false, fmt.Errorf("%s before the relist: %w", p.name, err)
		}
	}
	reset = true
	for _, p := range procs {
		if err := resetPeakRSS(p.pid); err != nil {
			logf("cannot reset %s's peak RSS (%v): its peak is since it started", p.name, err)
			reset = false
		}
	}
	began := time.Now()
	compact := func() error { _, err := b.cluster.env.CompactEtcd(); return err }
	if err := b.cluster.env.KillAPIServer(compact); err != nil {
		return reset, err
	}
	if b.cluster.apiPID, err = findProcess("kube-apiserver", b.cluster.env.CertDir()); err != nil {
		return reset, err
	}
	for i, p := range procs {
		var now float64
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			var perr error
			if now, perr = p.progress(ctx); perr != nil {
				logf("%s's relist progress: %v (retrying)", p.name, perr)
				return false, nil
			}
			return now-before[i] >= p.relisted, nil
		})
		if err != nil {
			return reset, fmt.Errorf("%s had not relisted 3 minutes after kube-apiserver's restart with etcd compacted (progress %.0f of %.0f): %w",
				p.name, now-before[i], p.relisted, err)
		}
	}
	logf("kube-apiserver killed, etcd compacted, kube-apiserver started; every cache relisted in %v", time.Since(began).Round(time.Second))
	return reset, nil
}
