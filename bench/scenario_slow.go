package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// slowConsumers is scenario 5: many watchers, 1% of them reading at a
// tenth of the speed, during a burst of writes; the fast watchers'
// throughput and delay against the same burst with no slow watcher, and
// informerd's heap.
func slowConsumers(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "slow",
		Title:   "5. Slow consumers",
		Plot:    "fast watchers' p99 ms",
		Columns: []string{"fast watchers' events/s", "fast watchers' p50 ms", "fast watchers' p99 ms", "slow watchers' events/s", "streams ended early", "informerd heap MiB after the burst"},
	}
	t := newTable()
	n := b.watchers[len(b.watchers)-1]
	// A slow reader takes 10× as long per event as the burst's rate of
	// events per watcher allows: it falls behind and is caught up from
	// history or ended with SLOW_CONSUMER.
	for run := range b.runs {
		for _, withSlow := range []bool{false, true} {
			var slow func(i int) time.Duration
			variant := "no slow watcher"
			if withSlow {
				variant = "1% slow (a tenth of the speed)"
				slow = func(i int) time.Duration {
					if i%100 == 0 {
						return 50 * time.Millisecond
					}
					return 0
				}
			}
			w, err := grpcWatchers(ctx, b.informerd.grpcAddr, n, b.nodes, slow)
			if err != nil {
				return s, err
			}
			acks, err := churn(ctx, b.cluster, b.ns, b.pods, b.nodes, 0, b.phaseTime)
			if err != nil {
				w.close()
				return s, err
			}
			quiesce(w)
			got := w.take()
			// A slow stream that falls behind the cache's history is ended
			// (docs/api.md); that is counted, not an error of the run.
			if err := foreign("informerd", got, acks); err != nil {
				w.close()
				return s, err
			}
			ended := w.ended.Load()
			heap, err := b.informerd.liveHeap(ctx)
			w.close()
			if err != nil {
				return s, err
			}
			var fast, slowGot [][]receipt
			for i, rs := range got {
				if withSlow && i%100 == 0 {
					slowGot = append(slowGot, rs)
				} else {
					fast = append(fast, rs)
				}
			}
			p50, p99 := delays(fast, acks)
			labels := []Label{{"watchers", strconv.Itoa(n)}, {"variant", variant}}
			t.add(labels, "fast watchers' events/s", float64(total(fast))/b.phaseTime.Seconds())
			t.add(labels, "fast watchers' p50 ms", p50)
			t.add(labels, "fast watchers' p99 ms", p99)
			if withSlow {
				t.add(labels, "slow watchers' events/s", float64(total(slowGot))/b.phaseTime.Seconds())
			}
			t.add(labels, "streams ended early", float64(ended))
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
		fmt.Sprintf("%d watchers as in scenario 1; one in 100 sleeps 50ms after each event; the burst is %v of writes as fast as kube-apiserver takes them.", n, b.phaseTime),
		"A slow watcher's queue fills; it is caught up from the history window when it reads again, and the other streams never wait for it (docs/api.md). Its events/s is what it managed to read.")
	return s, nil
}
