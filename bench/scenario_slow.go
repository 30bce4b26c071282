package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
)

// slowWindow is the flow-control window of the slow watchers' connection:
// grpc's initial window, fixed. A slow reader's events then wait in
// informerd, as they would for a client whose window has not grown, not
// in megabytes of its own transport's buffers where informerd never sees
// them.
const slowWindow = 64 << 10

// slowConsumers is scenario 5: many watchers, 1% of them reading at a
// tenth of the speed, during a burst of writes; the fast watchers'
// throughput and delay against the same burst with no slow watcher, and
// informerd's heap.
func slowConsumers(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "slow",
		Title:   "5. Slow consumers",
		Plot:    "fast watchers' p99 ms",
		Columns: []string{"fast watchers' events/s", "fast watchers' p50 ms", "fast watchers' p99 ms", "slow watchers' pause ms", "slow watchers' events/s", "slow streams ended", "informerd heap MiB after the burst"},
	}
	t := newTable()
	n := b.largest()
	isSlow := func(i int) bool { return i%100 == 0 }
	isFast := func(i int) bool { return !isSlow(i) }
	var lastPause time.Duration
	for run := range b.runs {
		// The run without slow watchers first: its events per watcher and
		// second set the slow readers' pause, ten times the time between
		// their events, so that they read at a tenth of the speed.
		var pause time.Duration
		for _, withSlow := range []bool{false, true} {
			variant := "no slow watcher"
			var pick func(int) bool // nil: every watcher
			if withSlow {
				variant = "1% slow (a tenth of the speed)"
				pick = isFast
			}
			fast, err := grpcWatchers(ctx, b.informerd.grpcAddr, n, b.nodes, pick, 0, nil)
			if err != nil {
				return s, err
			}
			slow := &watchers{cancel: func() {}}
			if withSlow {
				slow, err = grpcWatchers(ctx, b.informerd.grpcAddr, n, b.nodes, isSlow, pause, nil,
					grpc.WithStaticStreamWindowSize(slowWindow), grpc.WithStaticConnWindowSize(slowWindow))
				if err != nil {
					fast.close()
					return s, err
				}
			}
			closeAll := func() { fast.close(); slow.close() }
			acks, err := churn(ctx, b.cluster, b.ns, b.pods, b.nodes, 0, b.phaseTime)
			if err != nil {
				closeAll()
				return s, err
			}
			// Until the fast watchers are done; the slow ones read on.
			quiesce(fast)
			got := fast.take()
			// A fast stream that ended would go uncounted. A slow one that
			// fell out of the cache's history is ended with SLOW_CONSUMER
			// (docs/api.md): that is counted, not an error of the run.
			if err := checkReceipts("informerd, fast watchers", fast, got, acks); err != nil {
				closeAll()
				return s, err
			}
			var slowGot [][]receipt
			if withSlow {
				slowGot = slow.take()
				if err := foreign("informerd, slow watchers", slowGot, acks); err != nil {
					closeAll()
					return s, err
				}
			}
			heap, err := b.informerd.liveHeap(ctx)
			ended := slow.ended.Load()
			closeAll()
			if err != nil {
				return s, err
			}
			p50, p99 := delays(got, acks)
			labels := []Label{{"watchers", strconv.Itoa(n)}, {"variant", variant}}
			t.add(labels, "fast watchers' events/s", float64(total(got))/b.phaseTime.Seconds())
			t.add(labels, "fast watchers' p50 ms", p50)
			t.add(labels, "fast watchers' p99 ms", p99)
			if withSlow {
				t.add(labels, "slow watchers' pause ms", float64(pause)/float64(time.Millisecond))
				t.add(labels, "slow watchers' events/s", float64(total(slowGot))/b.phaseTime.Seconds())
				t.add(labels, "slow streams ended", float64(ended))
			} else {
				perWatcher := float64(total(got)) / b.phaseTime.Seconds() / float64(n)
				pause = time.Duration(10 / max(perWatcher, 0.01) * float64(time.Second))
				lastPause = pause
			}
			t.add(labels, "informerd heap MiB after the burst", heap/(1<<20))
			logf("run %d, slow consumers (%s) measured", run+1, variant)
		}
	}
	s.Rows = t.rows()
	with, ok1 := s.find("fast watchers' p99 ms", Label{"variant", "1% slow (a tenth of the speed)"})
	without, ok2 := s.find("fast watchers' p99 ms", Label{"variant", "no slow watcher"})
	if ok1 && ok2 {
		s.Notes = append(s.Notes, fmt.Sprintf("With slow watchers the fast ones' p99 delay is %.2f× the run without.", with/max(0.001, without)))
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d watchers as in scenario 1; the burst is %v of writes as fast as kube-apiserver takes them. One watcher in 100 sleeps after each event ten times the time between its events in the run without slow watchers (%v in the last run), so it reads at a tenth of the speed; the slow ones share a connection whose flow-control window is fixed at %d KiB, so their backlog waits in informerd.", n, b.phaseTime, lastPause.Round(time.Millisecond), slowWindow>>10),
		"A slow watcher's queue fills; it is caught up from the history window when it reads again, or ended with SLOW_CONSUMER when it falls out of the window, and the other streams never wait for it (docs/api.md). Its events/s is what it managed to read before the fast watchers were done.")
	return s, nil
}
