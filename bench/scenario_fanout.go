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
		Plot:    "events/serving-CPU-s",
		Columns: []string{"writes/s", "delivered/s", "server CPU-s per 1k delivered", "events/CPU-s", "serving CPU-s per 1k delivered", "events/serving-CPU-s", "kube-apiserver CPU-s per 1k delivered", "p50 ms", "p99 ms"},
	}
	t := newTable()
	phases := []phase{{"100/s", 100}, {"max", 0}}
	for run := range b.runs {
		// informerd's CPU per write with no watcher: its cost of ingesting
		// the writes, which exists without watchers. Subtracted from its
		// runs with watchers, it leaves its cost of serving them, measured
		// as kube-apiserver's is (its CPU minus its cost per write).
		ingest := map[string]float64{}
		for _, ph := range phases {
			m := meterCPU(b.informerd.pid)
			acks, err := churn(ctx, b.cluster, b.ns, b.pods, b.nodes, ph.rate, b.phaseTime)
			if err != nil {
				return s, err
			}
			time.Sleep(500 * time.Millisecond) // as quiesce's least wait
			cpu, _ := m.stop()
			ingest[ph.name] = cpu[0] / float64(max(1, len(acks)))
			labels := []Label{{"variant", "informerd"}, {"watchers", "0"}, {"phase", ph.name}}
			t.add(labels, "writes/s", float64(len(acks))/b.phaseTime.Seconds())
			logf("run %d, no watchers, %s, informerd: %.0f writes/s, %.3f CPU-ms per write", run+1, ph.name, float64(len(acks))/b.phaseTime.Seconds(), 1000*ingest[ph.name])
		}
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
				stopProfile := b.profile(n, ph, "informerd", pprofHTTP(b.informerd.metricsURL))
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
				serving := max(0.001, cpu[0]-float64(len(acks))*ingest[ph.name])
				t.add(labels, "serving CPU-s per 1k delivered", 1000*serving/max(1, delivered))
				t.add(labels, "events/serving-CPU-s", delivered/serving)
				t.add(labels, "kube-apiserver CPU-s per 1k delivered", 1000*cpu[1]/max(1, delivered))
				t.add(labels, "p50 ms", p50)
				t.add(labels, "p99 ms", p99)
				logf("run %d, %d watchers, %s, informerd: %.0f writes/s, %.0f delivered/s, %.2f CPU-s (%.2f serving)", run+1, n, ph.name, achieved[ph.name], delivered/b.phaseTime.Seconds(), cpu[0], serving)
			}
			w.close()

			// (b) kube-apiserver.
			w, err = apiWatchers(ctx, b.cluster, b.ns, n, b.nodes)
			if err != nil {
				return s, err
			}
			for _, ph := range phases {
				w.take()
				stopProfile := b.profile(n, ph, "kube-apiserver", pprofAPIServer(ctx, b.cluster))
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
				stopProfile()
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
				t.add(labels, "server CPU-s per 1k delivered", 1000*cpu[0]/max(1, delivered))
				t.add(labels, "events/CPU-s", delivered/max(0.01, cpu[0]))
				t.add(labels, "serving CPU-s per 1k delivered", 1000*serving/max(1, delivered))
				t.add(labels, "events/serving-CPU-s", delivered/serving)
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
				// The floor ingests nothing: all its CPU is serving.
				t.add(labels, "serving CPU-s per 1k delivered", 1000*cpu[0]/max(1, delivered))
				t.add(labels, "events/serving-CPU-s", delivered/max(0.01, cpu[0]))
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
	// totals, and which phase conditions it better varies. Both measures
	// of informerd: its serving CPU, measured as kube-apiserver's is (the
	// like-for-like ratio), and its whole process, ingest included.
	for _, ph := range phases {
		at := []Label{{"watchers", nmax}, {"phase", ph.name}}
		api, ok := s.find("events/serving-CPU-s", append(at, Label{"variant", "kube-apiserver"})...)
		if !ok {
			continue
		}
		for _, m := range []struct{ column, what string }{
			{"events/serving-CPU-s", "serving CPU"},
			{"events/CPU-s", "informerd's whole process"},
		} {
			if inf, ok := s.find(m.column, append(at, Label{"variant", "informerd"})...); ok {
				r := inf / api
				s.Goals = append(s.Goals, Goal{Name: "events per CPU-second, informerd / kube-apiserver serving (" + m.what + ", " + nmax + " watchers, " + ph.name + " churn)", Target: "≥ 3×",
					Measured: r, Met: r >= 3, Detail: fmt.Sprintf("%.1f× (%.0f vs %.0f)", r, inf, api)})
			}
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
		"server CPU: the whole process serving the watchers (for kube-apiserver, its writes included); the floor's process for the floor, which pushes pre-encoded bytes at the write rate informerd saw. Measured over the phase and until deliveries stop.",
		"serving CPU: the server's CPU minus its CPU per write times the writes, i.e. its cost of serving the N watches. For kube-apiserver, the CPU per write is its own in the informerd run of the same phase (writes plus informerd's one watch), with its `max` phase writing at the rate informerd's achieved so that the same writes are subtracted; writes cost it far more than serving, so this is a difference of two large totals and its spread is wide. For informerd, the CPU per write is its own with no watcher connected (the rows with 0 watchers, measured once per run and phase): its cost of ingesting the writes. The floor ingests nothing, so all its CPU is serving.",
		"delay: from the write's acknowledgement to each watcher's receipt (an event that arrives before the acknowledgement counts as 0); for the floor, from generation.",
		"All processes (etcd, kube-apiserver, informerd, the clients) share the machine's cores, so absolute rates are bounded by it; compare within a row group.")
	return s, nil
}

// profile writes a CPU profile of one server for the phase, when -profile
// is set and this is the largest fan-out's max phase; fetch asks the
// server for a profile of so many seconds. The returned func waits for it.
func (b *bench) profile(n int, ph phase, name string, fetch func(seconds int) (io.ReadCloser, error)) func() {
	if b.profileDir == "" || n != b.watchers[len(b.watchers)-1] || ph.rate != 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, err := fetch(int(b.phaseTime.Seconds()))
		if err != nil {
			logf("profile %s: %v", name, err)
			return
		}
		defer body.Close()
		_ = os.MkdirAll(b.profileDir, 0o755)
		path := filepath.Join(b.profileDir, fmt.Sprintf("%s-%dwatchers.pprof", name, n))
		f, err := os.Create(path)
		if err != nil {
			logf("profile %s: %v", name, err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, body); err != nil {
			logf("profile %s: %v", name, err)
			return
		}
		logf("wrote %s", path)
	}()
	return func() { <-done }
}

// pprofHTTP fetches a CPU profile from a Go process's /debug/pprof.
func pprofHTTP(metricsURL string) func(int) (io.ReadCloser, error) {
	return func(seconds int) (io.ReadCloser, error) {
		resp, err := http.Get(strings.TrimSuffix(metricsURL, "/metrics") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
		}
		return resp.Body, nil
	}
}

// pprofAPIServer fetches a CPU profile from kube-apiserver (its
// --profiling is on by default; the harness's credentials are admin).
func pprofAPIServer(ctx context.Context, c *cluster) func(int) (io.ReadCloser, error) {
	return func(seconds int) (io.ReadCloser, error) {
		return c.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).Stream(ctx)
	}
}
