package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

// quiesce waits until w has received nothing new for 500ms (at most 60s).
func quiesce(w *watchers) {
	last, still := int64(-1), time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := w.received.Load()
		if n != last {
			last, still = n, time.Now()
		} else if time.Since(still) > 500*time.Millisecond {
			return
		}
	}
}

type phase struct {
	name string
	rate float64 // writes per second; 0: as fast as the API server takes them
}

// fanOut is scenario 1: N watchers each watching the pods of one node,
// through informerd, directly on kube-apiserver, and on the bare floor.
func fanOut(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "fanout",
		Title:   "1. Watch fan-out",
		Plot:    "events/CPU-s",
		Columns: []string{"writes/s", "delivered/s", "server CPU-s per 1k delivered", "events/CPU-s", "kube-apiserver CPU-s per 1k delivered", "p50 ms", "p99 ms"},
	}
	t := newTable()
	phases := []phase{{"100/s", 100}, {"max", 0}}
	for run := range b.runs {
		for _, n := range b.watchers {
			achieved := map[string]float64{}
			// The API server's CPU per write with informerd as its only
			// pod watcher, to tell its cost of serving N watches.
			apiPerWrite := map[string]float64{}
			// (a) informerd.
			w, err := grpcWatchers(ctx, b.informerd.client, n, b.nodes, nil)
			if err != nil {
				return s, err
			}
			for _, ph := range phases {
				w.take()
				stopProfile := b.profile(n, ph, "informerd", b.informerd.metricsURL)
				m := meterCPU(b.informerd.pid, b.cluster.apiPID)
				acks, err := churn(ctx, b.cluster, b.ns, b.pods, b.nodes, ph.rate, b.phaseTime)
				if err != nil {
					w.close()
					return s, err
				}
				quiesce(w)
				cpu, _ := m.stop()
				stopProfile()
				got := w.take()
				if err := foreign("informerd", got, acks); err != nil {
					w.close()
					return s, err
				}
				delivered := float64(total(got))
				p50, p99 := delays(got, acks)
				achieved[ph.name] = float64(len(acks)) / b.phaseTime.Seconds()
				apiPerWrite[ph.name] = cpu[1] / float64(max(1, len(acks)))
				labels := []Label{{"variant", "informerd"}, {"watchers", strconv.Itoa(n)}, {"phase", ph.name}}
				t.add(labels, "writes/s", achieved[ph.name])
				t.add(labels, "delivered/s", delivered/b.phaseTime.Seconds())
				t.add(labels, "server CPU-s per 1k delivered", 1000*cpu[0]/max(1, delivered))
				t.add(labels, "events/CPU-s", delivered/max(0.01, cpu[0]))
				t.add(labels, "kube-apiserver CPU-s per 1k delivered", 1000*cpu[1]/max(1, delivered))
				t.add(labels, "p50 ms", p50)
				t.add(labels, "p99 ms", p99)
				logf("run %d, %d watchers, %s, informerd: %.0f writes/s, %.0f delivered/s, %.2f CPU-s", run+1, n, ph.name, achieved[ph.name], delivered/b.phaseTime.Seconds(), cpu[0])
			}
			w.close()

			// (b) kube-apiserver.
			w, err = apiWatchers(ctx, b.cluster, b.ns, n, b.nodes)
			if err != nil {
				return s, err
			}
			for _, ph := range phases {
				w.take()
				m := meterCPU(b.cluster.apiPID)
				// At the rate informerd's run of the phase achieved: the same
				// writes, whose cost is subtracted, with the watchers on top.
				rate := ph.rate
				if rate == 0 {
					rate = achieved[ph.name]
				}
				acks, err := churn(ctx, b.cluster, b.ns, b.pods, b.nodes, rate, b.phaseTime)
				if err != nil {
					w.close()
					return s, err
				}
				quiesce(w)
				cpu, _ := m.stop()
				got := w.take()
				if err := foreign("kube-apiserver", got, acks); err != nil {
					w.close()
					return s, err
				}
				delivered := float64(total(got))
				p50, p99 := delays(got, acks)
				serving := max(0.001, cpu[0]-float64(len(acks))*apiPerWrite[ph.name])
				labels := []Label{{"variant", "kube-apiserver"}, {"watchers", strconv.Itoa(n)}, {"phase", ph.name}}
				t.add(labels, "writes/s", float64(len(acks))/b.phaseTime.Seconds())
				t.add(labels, "delivered/s", delivered/b.phaseTime.Seconds())
				t.add(labels, "server CPU-s per 1k delivered", 1000*serving/max(1, delivered))
				t.add(labels, "events/CPU-s", delivered/serving)
				t.add(labels, "kube-apiserver CPU-s per 1k delivered", 1000*cpu[0]/max(1, delivered))
				t.add(labels, "p50 ms", p50)
				t.add(labels, "p99 ms", p99)
				logf("run %d, %d watchers, %s, kube-apiserver: %.0f delivered/s, %.2f CPU-s (%.2f serving)", run+1, n, ph.name, delivered/b.phaseTime.Seconds(), cpu[0], serving)
			}
			w.close()

			// (c) the floor, at the write rate informerd saw.
			addr, err := testenv.FreeAddr()
			if err != nil {
				return s, err
			}
			floor, err := startChild("floor", "--addr="+addr, "--watchers="+strconv.Itoa(n))
			if err != nil {
				return s, err
			}
			conn, err := dial(addr)
			if err != nil {
				floor.stop()
				return s, err
			}
			w, err = grpcWatchers(ctx, pb.NewCacheServiceClient(conn), n, b.nodes, nil)
			if err != nil {
				conn.Close()
				floor.stop()
				return s, err
			}
			for _, ph := range phases {
				w.take()
				m := meterCPU(floor.pid())
				fmt.Fprintf(floor.stdin, "run %g %g %d %d\n", achieved[ph.name], b.phaseTime.Seconds(), b.pods, b.nodes)
				line := <-floor.lines
				if !strings.HasPrefix(line, "done") {
					return s, fmt.Errorf("floor: %s", line)
				}
				quiesce(w)
				cpu, _ := m.stop()
				got := w.take()
				delivered := float64(total(got))
				p50, p99 := delays(got, nil)
				labels := []Label{{"variant", "floor"}, {"watchers", strconv.Itoa(n)}, {"phase", ph.name}}
				t.add(labels, "writes/s", achieved[ph.name])
				t.add(labels, "delivered/s", delivered/b.phaseTime.Seconds())
				t.add(labels, "server CPU-s per 1k delivered", 1000*cpu[0]/max(1, delivered))
				t.add(labels, "events/CPU-s", delivered/max(0.01, cpu[0]))
				t.add(labels, "p50 ms", p50)
				t.add(labels, "p99 ms", p99)
			}
			w.close()
			conn.Close()
			floor.stop()
		}
	}
	s.Rows = t.rows()
	nmax := strconv.Itoa(b.watchers[len(b.watchers)-1])
	// Both phases: kube-apiserver's serving CPU is a difference of two
	// totals, and which phase conditions it better varies.
	for _, ph := range phases {
		inf, ok1 := s.find("events/CPU-s", Label{"variant", "informerd"}, Label{"watchers", nmax}, Label{"phase", ph.name})
		api, ok2 := s.find("events/CPU-s", Label{"variant", "kube-apiserver"}, Label{"watchers", nmax}, Label{"phase", ph.name})
		if ok1 && ok2 {
			r := inf / api
			s.Goals = append(s.Goals, Goal{Name: "events per CPU-second, informerd / kube-apiserver (" + nmax + " watchers, " + ph.name + " churn)", Target: "≥ 3×",
				Measured: r, Met: r >= 3, Detail: fmt.Sprintf("%.1f× (%.0f vs %.0f)", r, inf, api)})
		}
	}
	infC, ok1 := s.find("server CPU-s per 1k delivered", Label{"variant", "informerd"}, Label{"watchers", nmax}, Label{"phase", "max"})
	flC, ok2 := s.find("server CPU-s per 1k delivered", Label{"variant", "floor"}, Label{"watchers", nmax}, Label{"phase", "max"})
	if ok1 && ok2 {
		r := infC / flC
		s.Goals = append(s.Goals, Goal{Name: "CPU per delivered event, informerd / bare grpc-go floor (" + nmax + " watchers, max churn)", Target: "≤ 1.5×",
			Measured: r, Met: r <= 1.5, Detail: fmt.Sprintf("%.2f× (%.3f vs %.3f CPU-s per 1k)", r, infC, flC)})
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d pods over %d nodes; watcher i watches node i mod %d; each phase writes for %v (merge patches of one annotation on random pods; `max` = 16 writers as fast as kube-apiserver acknowledges).", b.pods, b.nodes, b.nodes, b.phaseTime),
		"server CPU: informerd's process for informerd; for kube-apiserver, its CPU minus the CPU per write it used in the informerd run of the same phase (writes plus informerd's one watch), i.e. its cost of serving the N watches, with its `max` phase writing at the rate informerd's achieved so that the same writes are subtracted (a difference of two CPU totals, so its spread is wide); the floor's process for the floor, which pushes pre-encoded bytes at the write rate informerd saw. Measured over the phase and until deliveries stop.",
		"delay: from the write's acknowledgement to each watcher's receipt (an event that arrives before the acknowledgement counts as 0); for the floor, from generation.",
		"All processes (etcd, kube-apiserver, informerd, the clients) share the machine's cores, so absolute rates are bounded by it; compare within a row group.")
	return s, nil
}

// profile fetches a CPU profile of the process serving metricsURL for the
// phase, when -profile is set and this is the largest fan-out's max phase;
// the returned func waits for it.
func (b *bench) profile(n int, ph phase, name, metricsURL string) func() {
	if b.profileDir == "" || n != b.watchers[len(b.watchers)-1] || ph.rate != 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := strings.TrimSuffix(metricsURL, "/metrics") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(b.phaseTime.Seconds()))
		resp, err := http.Get(url)
		if err != nil {
			logf("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		_ = os.MkdirAll(b.profileDir, 0o755)
		path := filepath.Join(b.profileDir, fmt.Sprintf("%s-%dwatchers.pprof", name, n))
		f, err := os.Create(path)
		if err != nil {
			logf("profile %s: %v", name, err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
		logf("wrote %s", path)
	}()
	return func() { <-done }
}
