package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// sidecars is scenario 3: N processes each running their own client-go pod
// informer, against N thin gRPC clients of one informerd, and against N
// unmodified client-go informers pointed at one informerd's Kubernetes API;
// then, at the largest N, thin clients watching whole pods against thin
// clients watching a projection of them, under churn.
func sidecars(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:  "sidecars",
		Title: "3. N sidecars",
		Plot:  "total RSS MiB",
		Columns: append(append([]string{"total RSS MiB", "kube-apiserver CPU-s to start", "pod watches at kube-apiserver"},
			projectionColumns...), "clients' RSS MiB"),
	}
	t := newTable()
	if err := b.sidecarSetups(ctx, t); err != nil {
		return s, err
	}
	if err := b.projectedSidecars(ctx, t); err != nil {
		return s, err
	}
	s.Rows = t.rows()
	s.Goals = append(sidecarGoals(&s, b), projectedSidecarGoals(&s, b)...)
	s.Notes = append(s.Notes,
		fmt.Sprintf("Each client caches or watches the pods of %s (%d pods); an informer process strips managedFields (the kindest comparison for client-go); a thin client lists its node's pods by index and watches them.", b.ns, b.pods),
		"client-go informers on informerd's Kubernetes API: the same informer processes, unmodified, with a kubeconfig whose server is informerd's `--kube-api-address` (plain HTTP on loopback, no credentials, `--auth-mode none`): each lists and watches all the pods through informerd and caches them itself (informerd serves them without managedFields already).",
		"total RSS: the sum of /proc VmRSS over every process of the setup, informerd included.",
		"watches: the rise of kube-apiserver's apiserver_longrunning_requests{verb=\"WATCH\",resource=\"pods\"} while the clients run, plus informerd's own watch for the informerd setups.")
	s.Notes = append(s.Notes, projectedSidecarNotes(b)...)
	return s, nil
}

// sidecarSetups measures the N sidecars of each setup, for each N, with
// no churn.
func (b *bench) sidecarSetups(ctx context.Context, t *table) error {
	// A fresh informerd for each setup that uses one: the shared one
	// carries the fan-out scenario's churn in its history and its peak
	// RSS, and the informers' lists on the Kubernetes API leave theirs.
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(b.ns))
	if err != nil {
		return err
	}
	defer d.stop()
	dk, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(b.ns))
	if err != nil {
		return err
	}
	defer dk.stop()
	informer := func(kubeconfig string) func(int) []string {
		return func(int) []string {
			return []string{"--kubeconfig=" + kubeconfig, "--namespace=" + b.ns, "--strip-managed-fields=true"}
		}
	}
	all := func(int) int { return b.pods }
	setups := []sidecarSetup{
		{label: directInformers, child: "informer", args: informer(b.cluster.kubeconfig), objects: all},
		{label: thinClients, child: "thin", shared: d.pid,
			args:    func(i int) []string { return []string{"--addr=" + d.grpcAddr, "--node=" + nodeName(i, b.nodes)} },
			objects: func(i int) int { return podsOnNode(i, b.pods, b.nodes) }},
		{label: kubeAPIInformers, child: "informer", shared: dk.pid, args: informer(dk.kubeconfig), objects: all},
	}
	for run := range b.runs {
		for _, n := range b.sidecars {
			for _, setup := range setups {
				if err := b.measureSidecars(ctx, t, n, setup); err != nil {
					return fmt.Errorf("%d sidecars, %s: %w", n, setup.label, err)
				}
			}
			logf("run %d, %d sidecars measured", run+1, n)
		}
	}
	return nil
}

// sidecarGoals are the goals of the setups with no churn: total memory
// against an informer per process, and kube-apiserver's pod watches.
func sidecarGoals(s *Scenario, b *bench) []Goal {
	var goals []Goal
	n := strconv.Itoa(b.sidecars[len(b.sidecars)-1])
	cg, ok := s.find("total RSS MiB", Label{"clients", directInformers}, Label{"N", n})
	for _, c := range []struct {
		label, name, target string
		met                 func(float64) bool
	}{
		{thinClients, "thin clients + informerd", "≤ 0.2×", func(r float64) bool { return r <= 0.2 }},
		// Each informer still caches every pod it asks for; issue 20
		// asks for the figure, with no target.
		{kubeAPIInformers, "client-go informers on informerd's Kubernetes API + informerd", "", nil},
	} {
		inf, ok1 := s.find("total RSS MiB", Label{"clients", c.label}, Label{"N", n})
		if ok && ok1 {
			r := inf / cg
			g := Goal{Name: "total memory, " + c.name + " / informer per process (N=" + n + ")", Target: c.target,
				Measured: r, Detail: fmt.Sprintf("%.2f× (%.0f vs %.0f MiB)", r, inf, cg)}
			if c.met != nil {
				g.Met = c.met(r)
			}
			goals = append(goals, g)
		}
	}
	for _, size := range b.sidecars {
		n := strconv.Itoa(size)
		for _, c := range []struct{ label, via string }{{thinClients, "informerd"}, {kubeAPIInformers, "informerd's Kubernetes API"}} {
			w, ok := s.find("pod watches at kube-apiserver", Label{"clients", c.label}, Label{"N", n})
			if ok {
				goals = append(goals, Goal{Name: "pod watches at kube-apiserver with " + c.via + " (N=" + n + ")", Target: "1",
					Measured: w, Met: w == 1, Detail: fmt.Sprintf("%.0f", w)})
			}
		}
	}
	return goals
}

// The sidecars scenario's setups, by their rows' label.
const (
	directInformers  = "client-go informer per process"
	thinClients      = "thin gRPC clients + one informerd"
	kubeAPIInformers = "client-go informer per process on informerd's Kubernetes API + one informerd"
)

// sidecarSetup is one way of running N sidecars: the child each runs, with
// sidecar i's arguments and the objects it should report, and the informerd
// they share, if any (0: none).
type sidecarSetup struct {
	label   string
	child   string
	args    func(i int) []string
	objects func(i int) int
	shared  int
}

// measureSidecars starts n sidecars of setup and adds their row: the RSS
// of every process of the setup, kube-apiserver's CPU to start them, and
// the pod watches they (and informerd's own, with one) hold at
// kube-apiserver. It stops them before it returns.
func (b *bench) measureSidecars(ctx context.Context, t *table, n int, setup sidecarSetup) error {
	before, err := podWatches(ctx, b)
	if err != nil {
		return err
	}
	var kids []*child
	defer func() {
		for _, k := range kids {
			k.stop()
		}
	}()
	m := meterCPU(b.cluster.apiPID)
	for i := range n {
		k, err := startChild(setup.child, setup.args(i)...)
		if err != nil {
			return err
		}
		kids = append(kids, k)
		if got, want := k.report.Objects, setup.objects(i); got != want {
			return fmt.Errorf("sidecar %d has %d pods, want %d", i, got, want)
		}
	}
	cpu, _ := m.stop()
	rss, watches := 0.0, 0.0
	if setup.shared != 0 {
		r, _ := rssBytes(setup.shared)
		rss, watches = float64(r), 1 // informerd's own watch
	}
	for _, k := range kids {
		r, _ := rssBytes(k.pid())
		rss += float64(r)
	}
	during, err := podWatches(ctx, b)
	if err != nil {
		return err
	}
	labels := []Label{{"clients", setup.label}, {"N", strconv.Itoa(n)}, {"churn", noChurn}}
	t.add(labels, "total RSS MiB", rss/(1<<20))
	t.add(labels, "kube-apiserver CPU-s to start", cpu[0])
	// Plus any the clients added: none, with informerd.
	t.add(labels, "pod watches at kube-apiserver", watches+during-before)
	return nil
}

// podWatches reads the pod watches open at the API server once the count
// has held still for a second (watches of clients that just started or
// stopped take a moment to register or end).
func podWatches(ctx context.Context, b *bench) (float64, error) {
	last := -1.0
	for range 30 {
		m, err := b.cluster.apiMetrics(ctx)
		if err != nil {
			return 0, err
		}
		n := m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": "pods"})
		if n == last {
			return n, nil
		}
		last = n
		time.Sleep(time.Second)
	}
	return last, nil
}
