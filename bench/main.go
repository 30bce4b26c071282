// Command bench measures informerd side by side with the alternatives its
// users have — kube-apiserver serving the same watches and lists, client-go
// informers in every process, a bare grpc-go server — on one machine in one
// run, and writes results.json, results.md and SVG plots.
//
//	go run ./bench -mode=short -out=docs/benchmarks/short
//
// Modes: smoke (seconds of each scenario, for make test), short (about 16
// minutes on 2 cores), full (the sizes). Its child processes —
// bench/informer, bench/thin and bench/floor, each linking only what it
// needs — are built and run so each is measured alone.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bench holds a run's settings and the parts every scenario uses.
type bench struct {
	mode        string
	runs        int
	pods, nodes int
	watchers    []int
	phaseTime   time.Duration
	pacedTime   time.Duration // the largest fan-out's 100 writes/s phase; 0: phaseTime
	memorySizes []int
	// memorySettle: how long the memory scenario lets a process settle
	// after its sync, churn or relist before it reads its memory;
	// memoryChurn: how long it writes at 100 writes/s.
	memorySettle, memoryChurn time.Duration
	sidecars                  []int
	lists                     int
	relistPods                int // pods in the relist scenario's namespace
	relistN                   int // watchers or informers in the relist scenario
	// relistSettle: how long after kube-apiserver's restart the relist
	// scenario waits for clients to recover before it reads the counters.
	relistSettle time.Duration
	// The restart scenario: pods in each of its namespaces, gRPC watchers
	// resuming across informerd's restart, and the pod writes before
	// informerd's SIGTERM and while it is down.
	restartPods       []int
	restartN          int
	restartPreWrites  int
	restartDownWrites int
	restartPhase      time.Duration // the 100 writes/s phase after the restart
	ns                string
	dir               string
	informerdBin      string
	profileDir        string // where to write CPU profiles of the largest fan-out
	cluster           *cluster
	informerd         *daemon

	// The tiers scenario: nodes (a leaf each), watchers per node, the pods
	// of its namespace (spread over the nodes), and how long each of its
	// phases writes at 100 writes/s.
	tiersNodes, tiersPerNode, tiersPods int
	tiersPhase                          time.Duration

	// herdN is the herd scenario's watchers, reconnecting after a restart.
	herdN int

	// The capacity scenario: nodes, watchers per node, the pods of its
	// namespace (spread over the nodes), the bench/fleet processes its
	// client-go informers run in, how long they may take to sync, how long
	// its phases write at 100 writes/s, and the pod writes while its
	// informerd is down.
	capacityNodes, capacityPerNode, capacityPods, capacityChildren int
	capacitySync, capacityPhase                                    time.Duration
	capacityDownWrites                                             int
	// capacityVariants are the capacity scenario's variants to measure
	// (capGRPC, capKubeAPI, capAPIServer by their short names); all when
	// empty.
	capacityVariants map[string]bool

	// scalePods is the scale scenario's pods (issue 38).
	scalePods int
}

var modes = map[string]bench{
	"smoke": {runs: 1, pods: 300, nodes: 10, watchers: []int{10}, phaseTime: 2 * time.Second, memorySizes: []int{300}, memorySettle: 2 * time.Second, memoryChurn: 2 * time.Second, sidecars: []int{2}, lists: 20, relistPods: 50, relistN: 10, relistSettle: 10 * time.Second,
		restartPods: []int{300}, restartN: 10, restartPreWrites: 10, restartDownWrites: 20, restartPhase: 2 * time.Second,
		tiersNodes: 3, tiersPerNode: 5, tiersPods: 60, tiersPhase: 2 * time.Second, herdN: 50,
		capacityNodes: 4, capacityPerNode: 5, capacityPods: 40, capacityChildren: 2, capacitySync: 2 * time.Minute, capacityPhase: 2 * time.Second, capacityDownWrites: 10, scalePods: 300},
	"short": {runs: 3, pods: 2000, nodes: 100, watchers: []int{1000}, phaseTime: 5 * time.Second, memorySizes: []int{2000}, memorySettle: 5 * time.Second, memoryChurn: 20 * time.Second, sidecars: []int{10, 50}, lists: 200, relistPods: 200, relistN: 200, relistSettle: 10 * time.Second,
		restartPods: []int{2000}, restartN: 200, restartPreWrites: 50, restartDownWrites: 100, restartPhase: 10 * time.Second,
		tiersNodes: 20, tiersPerNode: 50, tiersPods: 1000, tiersPhase: 15 * time.Second, herdN: 5000,
		capacityNodes: 100, capacityPerNode: 10, capacityPods: 1000, capacityChildren: 4, capacitySync: 5 * time.Minute, capacityPhase: 15 * time.Second, capacityDownWrites: 50, scalePods: 20000},
	"full": {runs: 3, pods: 10000, nodes: 100, watchers: []int{10, 100, 1000}, phaseTime: 15 * time.Second, pacedTime: time.Minute, memorySizes: []int{10000, 50000}, memorySettle: 5 * time.Second, memoryChurn: time.Minute, sidecars: []int{10, 50}, lists: 1000, relistPods: 500, relistN: 1000, relistSettle: 30 * time.Second,
		restartPods: []int{10000, 50000}, restartN: 1000, restartPreWrites: 50, restartDownWrites: 100, restartPhase: 20 * time.Second,
		tiersNodes: 20, tiersPerNode: 50, tiersPods: 10000, tiersPhase: time.Minute, herdN: 5000,
		capacityNodes: 1000, capacityPerNode: 10, capacityPods: 10000, capacityChildren: 10, capacitySync: 5 * time.Minute, capacityPhase: time.Minute, capacityDownWrites: 100, scalePods: 200000},
}

// largest is the largest watcher count (b.watchers is sorted): its
// fan-out is profiled and the goals are judged at it.
func (b *bench) largest() int { return b.watchers[len(b.watchers)-1] }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	mode := flag.String("mode", "short", "smoke, short or full")
	out := flag.String("out", "", "folder for results.json, results.md and plots (default docs/benchmarks/<mode>, or a temporary folder for smoke)")
	runs := flag.Int("runs", 0, "repetitions of each measurement (default: 1 for smoke, 3 otherwise)")
	profile := flag.String("profile", "", "folder for CPU profiles of informerd and kube-apiserver during each phase of the largest fan-out (<server>-<N>watchers-<phase>.pprof, and -allocs.pprof for allocations)")
	watchers := flag.String("watchers", "", "comma-separated watcher counts for the fan-out and slow scenarios, overriding the mode's")
	phaseTime := flag.Duration("phase", 0, "how long each fan-out and slow-consumer phase writes (default: the mode's)")
	pacedTime := flag.Duration("paced-phase", 0, "how long the largest fan-out's 100 writes/s phase writes (default: the mode's, 1m in full mode; -phase otherwise)")
	memorySizes := flag.String("memory-sizes", "", "comma-separated pod counts for the memory scenario, overriding the mode's")
	scalePods := flag.Int("scale-pods", 0, "pods of the scale scenario, overriding the mode's (200,000 in full mode)")
	extra := flag.String("informerd-args", "", "space-separated flags added to each informerd over kube-apiserver, e.g. -informerd-args=--api-server-watch-http2 (the report's command line records them)")
	children := flag.Int("capacity-children", 0, "bench/fleet processes the capacity scenario's informers run in (default: the mode's: 2 smoke, 4 short, 10 full)")
	variants := flag.String("capacity-variants", "grpc,kubeapi,apiserver", "comma-separated variants of the capacity scenario to measure: grpc, kubeapi, apiserver")
	only := flag.String("scenarios", "fanout,memory,sidecars,list,slow,relist,restart,tiers,herd,capacity,scale", "comma-separated scenarios to run")
	flag.Parse()
	b, ok := modes[*mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: -mode %q: want smoke, short or full\n", *mode)
		os.Exit(2)
	}
	b.mode = *mode
	if *runs > 0 {
		b.runs = *runs
	}
	b.profileDir = *profile
	if *phaseTime < 0 {
		fmt.Fprintf(os.Stderr, "bench: -phase %v: want a positive duration\n", *phaseTime)
		os.Exit(2)
	}
	if *pacedTime < 0 {
		fmt.Fprintf(os.Stderr, "bench: -paced-phase %v: want a positive duration\n", *pacedTime)
		os.Exit(2)
	}
	if *phaseTime > 0 {
		b.phaseTime = *phaseTime
		b.pacedTime = 0
	}
	if *pacedTime > 0 {
		b.pacedTime = *pacedTime
	}
	if *watchers != "" {
		b.watchers = counts("-watchers", *watchers)
		slices.Sort(b.watchers) // b.largest() is the last
	}
	for _, a := range strings.Fields(*extra) {
		if !strings.HasPrefix(a, "--") {
			fmt.Fprintf(os.Stderr, "bench: -informerd-args %q: want flags such as --api-server-watch-http2, each starting with --\n", *extra)
			os.Exit(2)
		}
		informerdArgs = append(informerdArgs, a)
	}
	if *memorySizes != "" {
		b.memorySizes = counts("-memory-sizes", *memorySizes)
	}
	if *scalePods > 0 {
		b.scalePods = *scalePods
	}
	if *children > 0 {
		b.capacityChildren = *children
	}
	b.capacityVariants = map[string]bool{}
	for _, v := range strings.Split(*variants, ",") {
		switch v {
		case "grpc", "kubeapi", "apiserver":
			b.capacityVariants[v] = true
		default:
			fmt.Fprintf(os.Stderr, "bench: -capacity-variants %q: want grpc, kubeapi or apiserver, comma-separated\n", *variants)
			os.Exit(2)
		}
	}
	if err := run(&b, *out, strings.Split(*only, ",")); err != nil {
		logf("FAILED: %v", err)
		os.Exit(1)
	}
}

// counts parses a flag's comma-separated positive numbers, or exits.
func counts(flagName, value string) []int {
	var out []int
	for _, w := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: %s %q: want positive numbers\n", flagName, value)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func run(b *bench, out string, only []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if b.dir, err = os.MkdirTemp("", "informerd-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)
	if out == "" {
		out = filepath.Join("docs", "benchmarks", b.mode)
		if b.mode == "smoke" {
			out = filepath.Join(b.dir, "results")
		}
	}
	report := &Report{Mode: b.mode, Runs: b.runs, Started: time.Now(), Command: "go run ./bench " + strings.Join(os.Args[1:], " ")}
	report.Machine = machine()

	b.informerdBin = filepath.Join(b.dir, "informerd")
	logf("building informerd")
	build := exec.Command("go", "build", "-o", b.informerdBin, "./cmd/informerd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build informerd (run from the repository root): %w", err)
	}
	for _, name := range []string{"informer", "thin", "floor", "reader", "fleet"} {
		childBins[name] = filepath.Join(b.dir, name)
		build := exec.Command("go", "build", "-o", childBins[name], "./bench/"+name)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build bench/%s: %w", name, err)
		}
	}
	logf("starting kube-apiserver and etcd")
	if b.cluster, err = startCluster(b.dir); err != nil {
		return err
	}
	defer b.cluster.stop()
	b.ns = "bench"
	if err := b.cluster.loadPods(ctx, b.ns, b.pods, b.nodes); err != nil {
		return err
	}
	if b.informerd, err = startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(b.ns)); err != nil {
		return err
	}
	defer b.informerd.stop()

	scenarios := []struct {
		name string
		run  func(context.Context, *bench) (Scenario, error)
	}{{"fanout", fanOut}, {"memory", memory}, {"sidecars", sidecars}, {"list", listByIndex}, {"slow", slowConsumers}, {"relist", relist}, {"restart", restart}, {"tiers", tiers}, {"herd", herd}, {"capacity", capacity}, {"scale", scale}}
	for _, sc := range scenarios {
		if !contains(only, sc.name) {
			continue
		}
		logf("scenario %s", sc.name)
		start := time.Now()
		s, err := sc.run(ctx, b)
		if err != nil {
			// Keep what the scenarios before it measured.
			if len(report.Results) > 0 {
				report.Finished = time.Now()
				if werr := report.write(out); werr == nil {
					logf("wrote the scenarios before %s to %s", sc.name, out)
				}
			}
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		logf("scenario %s done in %v", sc.name, time.Since(start).Round(time.Second))
		report.Results = append(report.Results, s)
	}
	report.Finished = time.Now()
	if err := report.write(out); err != nil {
		return err
	}
	if err := check(out); err != nil {
		return fmt.Errorf("the results in %s are not well formed: %w", out, err)
	}
	logf("wrote %s (results.json, results.md, plots) in %v", out, report.Finished.Sub(report.Started).Round(time.Second))
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// check reads results.json back and verifies every scenario has rows, every
// value is finite, and the Markdown and plots exist.
func check(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if len(r.Results) == 0 {
		return fmt.Errorf("no scenarios")
	}
	for _, s := range r.Results {
		if len(s.Rows) == 0 {
			return fmt.Errorf("scenario %s has no rows", s.Name)
		}
		for _, row := range s.Rows {
			for col, st := range row.Values {
				for _, v := range append([]float64{st.Median, st.Min, st.Max}, st.Runs...) {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						return fmt.Errorf("scenario %s, %v, %s: %v", s.Name, row.Labels, col, v)
					}
				}
			}
		}
		if _, err := os.Stat(filepath.Join(dir, s.Name+".svg")); err != nil {
			return err
		}
	}
	_, err = os.Stat(filepath.Join(dir, "results.md"))
	return err
}

// machine describes this machine and the versions under test.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), KubeAPIServer: "v1.37.2", Etcd: "v3.7.3"}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb uint64
		fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(data), "\n", 2)[0], "MemTotal:")), "%d", &kb)
		m.MemoryBytes = kb << 10
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}
