package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// The capacity scenario's columns.
const (
	capConnect    = "connect and sync s"
	capWrites     = "writes/s"
	capDelivered  = "delivered/s"
	capP50        = "p50 ms"
	capP99        = "p99 ms"
	capMax        = "max ms"
	capServerP99  = "informerd's own p99 ms"
	capCPU        = "server CPU-s per 1k events"
	capClientCPU  = "clients' CPU %"
	capHeap       = "heap KiB per watcher"
	capRSS        = "RSS KiB per watcher"
	capGoroutines = "goroutines per watcher"
	capEnded      = "streams ended"
	capResume     = "all resumed after restart s"
	capRefused    = "refused after restart"
	capRelisted   = "relisted after restart"
	capNoResponse = "requests unanswered after restart"
)

// The capacity scenario's variants, its rows' variant label.
const (
	capGRPC      = "informerd gRPC"
	capKubeAPI   = "informerd Kubernetes API (TLS, HTTP/2)"
	capAPIServer = "kube-apiserver"
)

// capacityFallback is the size kube-apiserver is measured at when it cannot
// sync the scenario's full size on this machine.
const capacityFallback = 1000

// capacity is scenario 9 (issue 37): N watchers on one informerd, each on
// one node's pods, at 100 writes/s: over gRPC (many streams a connection)
// and to unmodified client-go informers on its Kubernetes API over TLS
// (HTTP/2, every informer of a process on one connection), against the same
// informers straight at kube-apiserver; then informerd restarts warm
// (--state-dir) under them.
func capacity(ctx context.Context, b *bench) (Scenario, error) {
	n := b.capacityNodes * b.capacityPerNode
	s := Scenario{
		Name:  "capacity",
		Title: "9. Capacity: " + strconv.Itoa(n) + " watchers on one informerd",
		Plot:  capP99,
		Columns: []string{capConnect, capWrites, capDelivered, capP50, capP99, capMax, capServerP99, capCPU, capClientCPU,
			capHeap, capRSS, capGoroutines, capEnded, capResume, capRefused, capRelisted, capNoResponse},
	}
	const ns = "capacity"
	if err := b.cluster.loadPods(ctx, ns, b.capacityPods, b.capacityNodes); err != nil {
		return s, err
	}
	d, err := startCapacityDaemon(b, ns)
	if err != nil {
		return s, err
	}
	defer d.Stop()
	if err := d.settled(ctx, b.capacityPods); err != nil {
		return s, err
	}
	c := &capacityCase{b: b, d: d, ns: ns, n: n, t: newTable()}
	apiN := n
	for run := range b.runs {
		if b.measures("grpc") {
			if err := c.grpc(ctx, run); err != nil {
				return s, fmt.Errorf("gRPC, run %d: %w", run+1, err)
			}
		}
		if b.measures("kubeapi") {
			if err := c.kubeAPI(ctx, run); err != nil {
				return s, fmt.Errorf("the Kubernetes API, run %d: %w", run+1, err)
			}
		}
		if !b.measures("apiserver") {
			continue
		}
		got, err := c.apiServer(ctx, run, apiN)
		if err != nil && apiN > capacityFallback {
			logf("kube-apiserver did not serve %d informers (%v); measuring it at %d", apiN, err, capacityFallback)
			c.apiFailure = fmt.Sprintf("kube-apiserver did not serve %d informers on this machine (%v); it is measured at %d.", apiN, err, capacityFallback)
			apiN = capacityFallback
			got, err = c.apiServer(ctx, run, apiN)
		}
		if err != nil {
			return s, fmt.Errorf("kube-apiserver, run %d: %w", run+1, err)
		}
		apiN = got
	}
	s.Rows = c.t.rows()
	s.Goals = c.goals(&s, apiN)
	s.Notes = c.notes(apiN)
	return s, nil
}

// measures reports whether the capacity scenario measures variant
// (-capacity-variants): all of them unless told otherwise.
func (b *bench) measures(variant string) bool {
	return len(b.capacityVariants) == 0 || b.capacityVariants[variant]
}

// capacityCase is one run of the capacity scenario's measurements.
type capacityCase struct {
	b          *bench
	d          *capacityDaemon
	ns         string
	n          int
	t          *table
	apiFailure string
}

func capLabels(variant string, n int) []Label {
	return []Label{{"variant", variant}, {"watchers", strconv.Itoa(n)}}
}

// phaseResult is what a 100 writes/s phase measured.
type phaseResult struct {
	acks      map[string]time.Time
	got       [][]receipt
	serverCPU float64
	clientCPU float64 // CPU-seconds of the clients over the phase; negative: not measured
	// ownP99 is informerd's own p99 delivery delay over the phase, ms
	// (informerd_watch_delivery_delay_seconds); negative for kube-apiserver.
	ownP99 float64
	wall   time.Duration
}

// addPhase adds a phase's rows: rates, delays, CPU.
func (c *capacityCase) addPhase(labels []Label, p phaseResult) error {
	if err := foreign(labels[0].Value, p.got, p.acks); err != nil {
		return err
	}
	ds := sortedDelays(p.got, p.acks, true)
	delivered := float64(len(ds))
	d := c.b.capacityPhase.Seconds()
	c.t.add(labels, capWrites, float64(len(p.acks))/d)
	c.t.add(labels, capDelivered, delivered/d)
	c.t.add(labels, capP50, percentile(ds, 50))
	c.t.add(labels, capP99, percentile(ds, 99))
	if len(ds) > 0 {
		c.t.add(labels, capMax, ds[len(ds)-1])
	}
	if p.ownP99 >= 0 {
		c.t.add(labels, capServerP99, p.ownP99)
	}
	c.t.add(labels, capCPU, 1000*p.serverCPU/max(1, delivered))
	if p.clientCPU >= 0 {
		c.t.add(labels, capClientCPU, 100*p.clientCPU/p.wall.Seconds())
	}
	logf("%s, %s watchers: %.0f writes/s, %.0f delivered/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %.3f server CPU-s per 1k events",
		labels[0].Value, labels[1].Value, float64(len(p.acks))/d, delivered/d, percentile(ds, 50), percentile(ds, 99), percentile(ds, 100), 1000*p.serverCPU/max(1, delivered))
	return nil
}

func (c *capacityCase) addFootprint(labels []Label, before, after serverFootprint, n int) {
	per := after.perWatcher(before, n)
	c.t.add(labels, capHeap, per.heap/1024)
	c.t.add(labels, capRSS, per.rss/1024)
	c.t.add(labels, capGoroutines, per.goroutines)
	logf("%s, %d watchers: %.1f KiB heap, %.1f KiB RSS, %.2f goroutines per watcher (heap %.0f → %.0f MiB)",
		labels[0].Value, n, per.heap/1024, per.rss/1024, per.goroutines, before.heap/(1<<20), after.heap/(1<<20))
}

// grpc measures n gRPC watchers on informerd, many streams a connection
// (watchesPerConn), then n gRPC watchers that resume across its restart.
func (c *capacityCase) grpc(ctx context.Context, run int) error {
	b, d, n := c.b, c.d, c.n
	labels := capLabels(capGRPC, n)
	before, err := d.footprint(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	w, err := grpcWatchers(ctx, d.GRPCAddr, n, b.capacityNodes, nil, 0, nil)
	if err != nil {
		return err
	}
	defer w.close()
	c.t.add(labels, capConnect, time.Since(start).Seconds())
	time.Sleep(time.Second)
	after, err := d.footprint(ctx)
	if err != nil {
		return err
	}
	c.addFootprint(labels, before, after, n)
	saveProfile(b, run, "capacity-grpc", "heap", 0, d.pprof)()
	w.take()
	own := ownDelay(ctx, d.metricsURL())
	m := meterCPU(d.PID())
	profiled := saveProfile(b, run, "capacity-grpc", "profile", int(b.capacityPhase.Seconds()), d.pprof)
	acks, err := churn(ctx, b.cluster, c.ns, b.capacityPods, b.capacityNodes, 100, b.capacityPhase)
	if err != nil {
		return err
	}
	quiesce(w)
	cpu, wall := m.stop()
	profiled()
	ownP99 := own()
	got := w.take()
	c.t.add(labels, capEnded, float64(w.ended.Load()))
	if err := c.addPhase(labels, phaseResult{acks: acks, got: got, serverCPU: cpu[0], clientCPU: -1, wall: wall, ownP99: ownP99}); err != nil {
		return err
	}
	w.close()

	// The restart, with watchers that resume as a careful client does.
	rv, err := (&restartDaemon{grpcAddr: d.GRPCAddr}).resourceVersion(ctx)
	if err != nil {
		return err
	}
	r, err := startResumers(ctx, d.GRPCAddr, n, b.capacityNodes, rv)
	if err != nil {
		return err
	}
	defer r.close()
	r.mark()
	// The writes they must receive are set before informerd starts again:
	// a watcher it admits at once may receive them before Restart returns.
	_, began, err := c.restart(ctx, r.expectWrites)
	if err != nil {
		return err
	}
	counts := r.waitRecovered(ctx, 3*time.Minute)
	took := time.Since(began)
	if counts.recovered < n {
		return fmt.Errorf("%d of %d gRPC watchers had not recovered 3 minutes after informerd's restart (%d refused, %d relisted, %d resumed)",
			n-counts.recovered, n, counts.outOfRange, counts.relisted, counts.resumed)
	}
	c.t.add(labels, capResume, took.Seconds())
	c.t.add(labels, capRefused, float64(counts.outOfRange))
	c.t.add(labels, capRelisted, float64(counts.relisted))
	logf("run %d, gRPC: %d of %d watchers resumed %.2f s after informerd's restart began (%d refused, %d relisted; %d of %d writes made while it was down delivered)",
		run+1, counts.resumed, n, took.Seconds(), counts.outOfRange, counts.relisted, counts.caught, counts.expected)
	return nil
}

// restart stops informerd (SIGTERM: it writes its state), writes to pods
// while it is down, calls wrote with the writes (nil: no call), and starts
// it again on the same addresses and --state-dir. It returns the writes
// and when the new process started.
func (c *capacityCase) restart(ctx context.Context, wrote func([]podWrite)) ([]podWrite, time.Time, error) {
	c.d.Stop()
	rc := &restartCase{b: c.b, ns: c.ns, pods: c.b.capacityPods, nodes: c.b.capacityNodes}
	down, err := rc.write(ctx, c.b.capacityDownWrites)
	if err != nil {
		return nil, time.Time{}, err
	}
	if wrote != nil {
		wrote(down)
	}
	start := time.Now()
	if err := c.d.Restart(); err != nil {
		return nil, time.Time{}, fmt.Errorf("restart informerd: %w", err)
	}
	return down, start, nil
}

// kubeAPI measures n unmodified client-go informers on informerd's
// Kubernetes API over TLS (HTTP/2), in a few child processes, then keeps
// them across informerd's restart.
func (c *capacityCase) kubeAPI(ctx context.Context, run int) error {
	b, d, n := c.b, c.d, c.n
	labels := capLabels(capKubeAPI, n)
	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	if err != nil {
		return err
	}
	if err := warm(ctx, cfg, c.ns); err != nil {
		return err
	}
	before, err := d.footprint(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	f, err := startFleet(ctx, b.dir, d.kubeconfig, c.ns, n, b.capacityNodes, b.capacityPods, b.capacityChildren, b.capacitySync)
	if err != nil {
		return err
	}
	defer f.close()
	c.t.add(labels, capConnect, time.Since(start).Seconds())
	p, err := c.fleetPhase(ctx, run, f, labels, before, func() (serverFootprint, error) { return d.footprint(ctx) }, d.PID(), d.metricsURL(), "kubeapi", d.pprof)
	if err != nil {
		return err
	}
	if err := c.addPhase(labels, p); err != nil {
		return err
	}

	// The restart: the same informers, as client-go recovers.
	if _, err := f.take(ctx); err != nil {
		return err
	}
	if err := f.mark(ctx); err != nil {
		return err
	}
	down, began, err := c.restart(ctx, nil)
	if err != nil {
		return err
	}
	due := eventsDue(down, n, b.capacityNodes)
	var st fleetStats
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if st, err = f.stats(ctx); err != nil {
			return err
		}
		if st.Resumed+st.Relisted >= n && st.Received >= due {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("3 minutes after informerd's restart, %d of %d informers had resumed and %d relisted, told %d of the %d events written while it was down",
				st.Resumed, n, st.Relisted, st.Received, due)
		}
	}
	took := time.Since(began)
	c.t.add(labels, capResume, took.Seconds())
	c.t.add(labels, capRefused, float64(st.Refused))
	c.t.add(labels, capRelisted, float64(st.Relisted))
	c.t.add(labels, capNoResponse, float64(st.Failed))
	logf("run %d, Kubernetes API: %d of %d informers resumed %.2f s after informerd's restart began (%d relisted; %d requests refused %v, %d without a response, %d watch errors; %d events told, %d written while it was down due)",
		run+1, st.Resumed, n, took.Seconds(), st.Relisted, st.Refused, st.RefusedBy, st.Failed, st.Errors, st.Received, due)
	for _, code := range slices.Sorted(maps.Keys(st.Refusals)) {
		logf("run %d, Kubernetes API: the first %d after the restart: %s", run+1, code, st.Refusals[code])
	}
	return nil
}

// fleetPhase reads the server's footprint with the fleet connected, then
// writes at 100/s and returns what the informers were told. The streams
// that ended in the phase are the requests the informers sent in it: a
// client-go informer sends one (a watch, or a list) only when its watch
// has ended. With -profile, the server's heap and CPU profiles are written
// as capacity-<name>-*.pprof.
func (c *capacityCase) fleetPhase(ctx context.Context, run int, f *informerFleet, labels []Label, before serverFootprint, footprintNow func() (serverFootprint, error),
	serverPID int, metricsURL, name string, get pprofGet) (phaseResult, error) {
	time.Sleep(time.Second)
	after, err := footprintNow()
	if err != nil {
		return phaseResult{}, err
	}
	c.addFootprint(labels, before, after, f.n)
	saveProfile(c.b, run, "capacity-"+name, "heap", 0, get)()
	if _, err := f.take(ctx); err != nil {
		return phaseResult{}, err
	}
	if err := f.mark(ctx); err != nil {
		return phaseResult{}, err
	}
	own := func() float64 { return -1 }
	if metricsURL != "" {
		own = ownDelay(ctx, metricsURL)
	}
	m := meterCPU(append([]int{serverPID}, f.pids()...)...)
	profiled := saveProfile(c.b, run, "capacity-"+name, "profile", int(c.b.capacityPhase.Seconds()), get)
	traced := func() {}
	if name == "kubeapi" {
		// An execution trace of the phase's start, for what a CPU profile
		// cannot see, a flush that waits: `go tool trace -pprof=sync` and
		// `-pprof=sched` read it.
		traced = saveProfile(c.b, run, "capacity-"+name, "trace", max(1, int(c.b.capacityPhase.Seconds()/6)), get)
	}
	acks, err := churn(ctx, c.b.cluster, c.ns, c.b.capacityPods, c.b.capacityNodes, 100, c.b.capacityPhase)
	if err != nil {
		return phaseResult{}, err
	}
	f.quiesce(ctx)
	cpu, wall := m.stop()
	profiled()
	traced()
	ownP99 := own()
	st, err := f.stats(ctx)
	if err != nil {
		return phaseResult{}, err
	}
	got, err := f.take(ctx)
	if err != nil {
		return phaseResult{}, err
	}
	c.t.add(labels, capEnded, float64(st.Watches+st.Lists+st.Refused+st.Failed))
	clients := 0.0
	for _, v := range cpu[1:] {
		clients += v
	}
	return phaseResult{acks: acks, got: got, serverCPU: cpu[0], clientCPU: clients, wall: wall, ownP99: ownP99}, nil
}

// apiServer measures n client-go informers straight at kube-apiserver, as
// the Kubernetes API's are measured, and returns n.
func (c *capacityCase) apiServer(ctx context.Context, run, n int) (int, error) {
	b := c.b
	labels := capLabels(capAPIServer, n)
	if err := warm(ctx, b.cluster.config, c.ns); err != nil {
		return n, err
	}
	before, err := apiFootprint(ctx, b.cluster)
	if err != nil {
		return n, err
	}
	start := time.Now()
	f, err := startFleet(ctx, b.dir, b.cluster.kubeconfig, c.ns, n, b.capacityNodes, b.capacityPods, b.capacityChildren, b.capacitySync)
	if err != nil {
		return n, err
	}
	defer f.close()
	c.t.add(labels, capConnect, time.Since(start).Seconds())
	p, err := c.fleetPhase(ctx, run, f, labels, before, func() (serverFootprint, error) { return apiFootprint(ctx, b.cluster) }, b.cluster.apiPID,
		"", "apiserver", apiPprof(ctx, b.cluster))
	if err != nil {
		return n, err
	}
	logf("run %d, kube-apiserver: %d informers", run+1, n)
	return n, c.addPhase(labels, p)
}

// goals are issue 37's.
func (c *capacityCase) goals(s *Scenario, apiN int) []Goal {
	var goals []Goal
	n := strconv.Itoa(c.n)
	for _, v := range []string{capGRPC, capKubeAPI} {
		at := capLabels(v, c.n)
		p99, ok1 := s.find(capP99, at...)
		ended, ok2 := s.stat(capEnded, at...)
		if ok1 && ok2 {
			goals = append(goals, Goal{Name: "p99 delivery delay and streams ended, " + n + " watchers at 100 writes/s, " + v, Target: "< 100 ms, none ended",
				Measured: p99, Met: p99 < 100 && ended.Max == 0, Detail: fmt.Sprintf("p99 %s ms; %s streams ended", num(p99), num(ended.Max))})
		}
	}
	api, ok := s.find(capHeap, capLabels(capAPIServer, apiN)...)
	for _, v := range []string{capGRPC, capKubeAPI} {
		inf, ok2 := s.find(capHeap, capLabels(v, c.n)...)
		if ok && ok2 && api > 0 {
			r := inf / api
			at := ""
			if apiN != c.n {
				at = fmt.Sprintf(", kube-apiserver's at %d", apiN)
			}
			goals = append(goals, Goal{Name: "heap per watcher, " + v + " / kube-apiserver (" + n + " watchers" + at + ")", Target: "≤ 0.5×",
				Measured: r, Met: r <= 0.5, Detail: fmt.Sprintf("%.2f× (%s vs %s KiB)", r, num(inf), num(api))})
		}
	}
	for _, v := range []string{capGRPC, capKubeAPI} {
		at := capLabels(v, c.n)
		took, ok1 := s.stat(capResume, at...)
		refused, ok2 := s.stat(capRefused, at...)
		relisted, ok3 := s.stat(capRelisted, at...)
		if ok1 && ok2 && ok3 {
			goals = append(goals, Goal{Name: n + " watchers resumed after a warm restart (--state-dir), " + v, Target: "< 10 s, none refused",
				Measured: took.Max, Met: took.Max < 10 && refused.Max == 0 && relisted.Max == 0,
				Detail: fmt.Sprintf("%s s [%s–%s]; %s refused, %s relisted", num(took.Median), num(took.Min), num(took.Max), num(refused.Max), num(relisted.Max))})
		}
	}
	return goals
}

func (c *capacityCase) notes(apiN int) []string {
	b := c.b
	notes := []string{
		fmt.Sprintf("%d watchers on one informerd, %d per node on %d nodes (watcher i on node i mod %d), %d pods spread over the nodes in a namespace of their own; that informerd caches only it, with --state-dir and its Kubernetes API over TLS (--kube-api-tls-self-signed, --auth-mode none). Each phase writes 100 merge patches a second (one annotation, random pods) for %v.",
			c.n, b.capacityPerNode, b.capacityNodes, b.capacityNodes, b.capacityPods, b.capacityPhase),
		fmt.Sprintf("%s: Watch-by-index streams (index node = spec.nodeName) in the harness, %d a connection. %s: unmodified client-go pod informers (a SharedInformerFactory each, fieldSelector spec.nodeName=<node>) in %d bench/fleet processes, each process's informers sharing one transport, so one HTTP/2 connection carries all of them (informerd allows --max-watches+100 streams a connection). %s: the same fleet with the harness's admin credentials.",
			capGRPC, watchesPerConn, capKubeAPI, b.capacityChildren, capAPIServer),
		"delay: from the write's acknowledgement to each watcher's receipt (an event that arrives before the acknowledgement counts as 0); max is the largest of all receipts. informerd's own p99: from its delivery delay histogram (informerd_watch_delivery_delay_seconds, the change's entry in the cache to its bytes flushed to the watch) over the phase, interpolated in buckets a factor 4 apart: the part of the delay informerd itself adds. server CPU: the server process's over the phase and until deliveries stop (/proc), per 1,000 events delivered; informerd's includes its ingest of the writes, kube-apiserver's the writes themselves. clients' CPU: the fleet's processes together, in % of one core (gRPC watchers run in the harness, not measured).",
		"per watcher: the server's live heap after two forced GCs (pprof's heap?gc=1 twice: the second frees what sync.Pools kept through the first), then go_gc_heap_live_bytes, or go_memstats_heap_alloc_bytes where a process exports no live figure), RSS and goroutines with the watchers connected and synced, less the same before they connected, over the watchers. Before the first of those, one client reads every pod as an informer's first sync does (a watch with sendInitialEvents, in protobuf), so that what a server keeps per object once any client has read it (informerd: objects its --state-dir restore left off the heap, decoded; their protobuf forms) is not charged to the watchers.",
		"streams ended: gRPC streams that ended before the harness closed them; for informers, the requests they sent during the phase (a client-go informer sends one, a watch or a list, only when its watch has ended).",
		fmt.Sprintf("restart: informerd gets SIGTERM (it writes its state), %d pod writes at 50/s while it is down, then it starts again on the same addresses and --state-dir. gRPC: %d new watchers, watching from the pods' resourceVersion before the restart, call Watch again from the last resourceVersion they received (backoff 0.1–2 s); refused with OUT_OF_RANGE they relist. Informers: the same fleet, recovering as client-go does. all resumed: from the new process's start until every watcher is watching again from its resourceVersion and has received the writes on its node made while informerd was down. refused: OUT_OF_RANGE for gRPC, responses other than 200 for informers; relisted: watchers that listed again; unanswered: the informers' requests that got no response (connection refused while informerd was down: client-go retries a watch refused so with its backoff, 0.8 s doubling to 30 s, jittered; the gRPC watchers wait for the connection, WaitForReady).",
			b.capacityDownWrites, c.n),
		"All processes (etcd, kube-apiserver, informerd, the harness and the fleet) share the machine's cores, and the machine may be shared with other work: absolute times are bounded by it; compare within a run.",
	}
	if c.apiFailure != "" {
		notes = append(notes, "**"+c.apiFailure+"**")
	} else if apiN == c.n {
		notes = append(notes, fmt.Sprintf("kube-apiserver served all %d informers.", c.n))
	}
	return notes
}
