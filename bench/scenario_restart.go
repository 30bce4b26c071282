package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	bolt "go.etcd.io/bbolt"
)

// The restart scenario's columns.
const (
	colServing    = "time to SERVING s"
	colStartCPU   = "CPU-s to SERVING"
	colPeakRSS    = "peak RSS MiB to SERVING"
	colUpRequests = "upstream requests"
	colUpLists    = "upstream pod lists"
	colUpWatches  = "upstream pod watches"
	colUpMiB      = "upstream MiB"
	colRelists    = "client relists"
	colResumed    = "clients resumed"
	colResent     = "objects re-sent to clients"
	colWriteCPU   = "CPU ms per write (100/s)"
	colWriteTime  = "state write ms per write"
	colStateFile  = "state file bytes/pod"
	colStateData  = "state data bytes/pod"
)

// podsPerNode caps the pods of a node in the restart scenario's namespaces,
// as on a real node (110 at most), so that a relisting watcher gets
// what a kubelet-like client would.
const podsPerNode = 100

// restart is scenario 7 (issue 21): informerd started cold (no
// --state-dir: it lists every pod from kube-apiserver) against started
// warm (--state-dir holding what its previous run wrote at SIGTERM: it
// serves the restored cache at once and resumes its upstream watch from
// the restored resourceVersion), with W watchers that resume across the
// restart and writes while informerd is down.
func restart(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:  "restart",
		Title: "7. Restart: cold against warm (--state-dir)",
		Plot:  colServing,
		Columns: []string{colServing, colStartCPU, colPeakRSS, colUpRequests, colUpLists, colUpWatches, colUpMiB,
			colRelists, colResumed, colResent, colWriteCPU, colWriteTime, colStateFile, colStateData},
	}
	t := newTable()
	proxy, err := startUpstreamProxy(b.cluster.config)
	if err != nil {
		return s, err
	}
	defer proxy.close()
	kubeconfig := filepath.Join(b.dir, "restart-upstream.kubeconfig")
	if err := writeKubeconfig(kubeconfig, proxy.url()); err != nil {
		return s, err
	}
	var anomalies []string
	for _, size := range b.restartPods {
		rc := &restartCase{b: b, proxy: proxy, kubeconfig: kubeconfig, pods: size,
			ns: fmt.Sprintf("restart-%d", size), nodes: max(b.nodes, size/podsPerNode), watchers: b.restartN}
		if err := b.cluster.loadPods(ctx, rc.ns, size, rc.nodes); err != nil {
			return s, err
		}
		rc.config = filepath.Join(b.dir, rc.ns+".yaml")
		if err := os.WriteFile(rc.config, []byte(podsConfig(rc.ns)), 0o600); err != nil {
			return s, err
		}
		for run := range b.runs {
			for _, warm := range []bool{false, true} {
				m, err := rc.cycle(ctx, run, warm)
				if err != nil {
					return s, fmt.Errorf("%d pods, %s start, run %d: %w", size, startKind(warm), run+1, err)
				}
				labels := []Label{{"pods", strconv.Itoa(size)}, {"start", startKind(warm)}}
				t.add(labels, colServing, m.serving.Seconds())
				t.add(labels, colStartCPU, m.cpu)
				t.add(labels, colPeakRSS, float64(m.peakRSS)/(1<<20))
				t.add(labels, colUpRequests, float64(m.up.totalRequests()))
				t.add(labels, colUpLists, float64(m.up.requests[upList]+m.up.requests[upStreamingList]))
				t.add(labels, colUpWatches, float64(m.up.requests[upWatch]))
				t.add(labels, colUpMiB, float64(m.up.totalBytes())/(1<<20))
				t.add(labels, colRelists, float64(m.clients.outOfRange))
				t.add(labels, colResumed, float64(m.clients.resumed))
				t.add(labels, colResent, float64(m.resent))
				t.add(labels, colWriteCPU, m.cpuPerWrite*1000)
				if warm {
					t.add(labels, colWriteTime, m.writeTimePerWrite*1000)
					t.add(labels, colStateFile, float64(m.stateFile)/float64(size))
					t.add(labels, colStateData, float64(m.stateData)/float64(size))
				}
				logf("upstream by kind (requests/bytes): list %d/%d, streaming list %d/%d, watch %d/%d, other %d/%d",
					m.up.requests[upList], m.up.bytes[upList], m.up.requests[upStreamingList], m.up.bytes[upStreamingList],
					m.up.requests[upWatch], m.up.bytes[upWatch], m.up.requests[upOther], m.up.bytes[upOther])
				for _, a := range m.anomalies {
					anomalies = append(anomalies, fmt.Sprintf("%d pods, %s start, run %d: %s", size, startKind(warm), run+1, a))
				}
				logf("run %d, %d pods, %s start: SERVING after %v, %d upstream requests (%d lists, %d watches), %.1f MiB; %d of %d watchers relisted, %d resumed (%d of %d missed writes delivered); %.3f ms CPU per write",
					run+1, size, startKind(warm), m.serving.Round(time.Millisecond), m.up.totalRequests(),
					m.up.requests[upList]+m.up.requests[upStreamingList], m.up.requests[upWatch], float64(m.up.totalBytes())/(1<<20),
					m.clients.outOfRange, rc.watchers, m.clients.resumed, m.clients.caught, m.clients.expected, m.cpuPerWrite*1000)
			}
		}
	}
	s.Rows = t.rows()
	s.Notes = append(s.Notes,
		fmt.Sprintf("Each run, for each start kind: informerd starts (warm: with an empty --state-dir, which it fills; cold: without --state-dir) and syncs; %d gRPC watchers, watcher i on the pods of node i%%nodes (at most %d pods a node), watch from its resourceVersion; %d pod writes at 50/s; %v later informerd is stopped with SIGTERM (the warm one writes its state then); %d pod writes at 50/s while it is down; then the same informerd starts again, with the same --state-dir for the warm start, and is measured. Every watcher calls Watch again from the last resourceVersion it received (backoff 0.1–2 s, as a client would); refused with OUT_OF_RANGE it relists (a Watch with send_initial_events).",
			b.restartN, podsPerNode, b.restartPreWrites, stateSettle, b.restartDownWrites),
		"time to SERVING: from the process's start to the first gRPC health check answering SERVING (polled every 10 ms); CPU-s: the process's user+system CPU then (/proc); peak RSS: its VmHWM then.",
		"upstream: every request informerd sent to kube-apiserver from its start until every watcher has recovered (resumed and received the writes on its node made while informerd was down, or relisted) and, for the warm start, the API server has confirmed the restored cache (informerd_cache_restored 0), plus 1 s; counted by an HTTP reverse proxy between informerd and kube-apiserver (informerd's kubeconfig names it). Pod lists: LISTs and WATCHes with sendInitialEvents=true (a list streamed as events; what informerd's reflector sends); pod watches: WATCHes without initial events (the warm start's watch from the restored resourceVersion); requests also count discovery. MiB: response bytes, all requests.",
		"client relists: watchers whose Watch from their resourceVersion was refused with OUT_OF_RANGE after the restart; resumed: watchers admitted from their resourceVersion by the restarted informerd; objects re-sent: the pods the relisting watchers received again.",
		fmt.Sprintf("CPU per write: informerd's CPU (/proc, 10 ms ticks) over a phase of %v at 100 pod writes/s after the restart (watchers closed), plus 1.5 s, per acknowledged write: without --state-dir in the cold rows, with it (the default flush, every 1 s or 1,000 changes) in the warm rows. State write ms per write: the growth of informerd_state_write_seconds_total (wall time in writes, fsync included) over that phase, per write.", b.restartPhase),
		fmt.Sprintf("State bytes/pod: <state-dir>/pods.db after the first informerd's SIGTERM (the pods and a history of about %d events), over the pods: the file's size (bbolt grows a file in steps of up to 16 MiB) and the bytes of its pages in use (bbolt's high-water mark less its free pages).", b.restartPreWrites),
		"All processes (etcd, kube-apiserver, informerd, the harness and its watchers) share the machine's cores; times and CPU are noisy when the machine is shared.")
	if len(anomalies) == 0 {
		s.Notes = append(s.Notes, "Checks: no warm start had its state set aside (informerd_state_set_aside 0), listed pods upstream or relisted (informerd_upstream_relists_total 0), refused a watcher, and every resumed watcher received every write made on its node while informerd was down.")
	}
	for _, a := range anomalies {
		s.Notes = append(s.Notes, "**Anomaly**: "+a)
		logf("anomaly: %s", a)
	}
	return s, nil
}

func startKind(warm bool) string {
	if warm {
		return "warm (--state-dir)"
	}
	return "cold"
}

// stateSettle is how long informerd runs after its last pre-stop write:
// more than a flush interval, so the warm one has written its state
// before SIGTERM (which writes what is left anyway).
const stateSettle = 1500 * time.Millisecond

// restartCase is one size of the restart scenario.
type restartCase struct {
	b           *bench
	proxy       *upstreamProxy
	kubeconfig  string
	config      string
	ns          string
	pods, nodes int
	watchers    int
}

// restartRun is one cycle's measurements.
type restartRun struct {
	serving     time.Duration
	cpu         float64
	peakRSS     uint64
	up          upstreamCounts
	clients     resumeCounts
	resent      int64
	cpuPerWrite float64 // seconds
	// writeTimePerWrite: informerd's time writing its state in that
	// phase, per write (seconds); stateFile and stateData: the state's file
	// size and the bytes its pages take, after the first SIGTERM.
	writeTimePerWrite    float64
	stateFile, stateData int64
	anomalies            []string
}

// cycle starts informerd, lets it sync, connects the watchers, writes,
// stops it, writes while it is down, starts it again and measures that
// start, then the cost of writes at 100/s.
func (rc *restartCase) cycle(ctx context.Context, run int, warm bool) (restartRun, error) {
	var m restartRun
	b := rc.b
	stateDir := ""
	if warm {
		stateDir = filepath.Join(b.dir, fmt.Sprintf("state-%s-%d", rc.ns, run))
		defer os.RemoveAll(stateDir)
	}
	d, err := newRestartDaemon(b.informerdBin, rc.config, rc.kubeconfig, stateDir)
	if err != nil {
		return m, err
	}
	defer d.kill()
	// The previous run: a cold start, which fills --state-dir if it has one.
	if err := d.start(); err != nil {
		return m, err
	}
	if _, err := d.waitServing(ctx, 5*time.Minute); err != nil {
		return m, err
	}
	rv, err := d.resourceVersion(ctx)
	if err != nil {
		return m, err
	}
	w, err := startResumers(ctx, d.grpcAddr, rc.watchers, rc.nodes, rv)
	if err != nil {
		return m, err
	}
	defer w.close()
	if _, err := rc.write(ctx, b.restartPreWrites); err != nil {
		return m, err
	}
	time.Sleep(stateSettle)
	if warm {
		if err := d.waitStateWritten(ctx, 2*time.Minute); err != nil {
			return m, err
		}
	}
	w.mark()
	if err := d.stop(); err != nil {
		return m, err
	}
	if warm {
		if m.stateFile, m.stateData, err = stateSize(filepath.Join(stateDir, "pods.db")); err != nil {
			return m, fmt.Errorf("the state informerd wrote: %w", err)
		}
	}
	down, err := rc.write(ctx, b.restartDownWrites)
	if err != nil {
		return m, err
	}
	w.expectWrites(down)

	// The measured start.
	before := rc.proxy.counts()
	if err := d.start(); err != nil {
		return m, err
	}
	st, err := d.waitServing(ctx, 5*time.Minute)
	if err != nil {
		return m, err
	}
	m.serving, m.cpu, m.peakRSS = st.took, st.cpu, st.peakRSS
	atServing, err := scrape(ctx, d.metricsURL())
	if err != nil {
		return m, err
	}
	pods := map[string]string{"resource": "pods"}
	if warm && atServing.sum("informerd_state_set_aside", pods) != 0 {
		m.anomalies = append(m.anomalies, "informerd_state_set_aside was 1: the state was refused and informerd started cold")
	}
	m.clients = w.waitRecovered(ctx, 3*time.Minute)
	if m.clients.recovered < rc.watchers {
		m.anomalies = append(m.anomalies, fmt.Sprintf("%d of %d watchers had not recovered 3 minutes after the restart (%d refused, %d relisted, %d resumed; resumed ones received %d of the %d writes due to them)",
			rc.watchers-m.clients.recovered, rc.watchers, m.clients.outOfRange, m.clients.relisted, m.clients.resumed, m.clients.caught, m.clients.expected))
	}
	if warm {
		if err := d.waitConfirmed(ctx, time.Minute); err != nil {
			m.anomalies = append(m.anomalies, err.Error())
		}
	}
	time.Sleep(time.Second)
	m.up = rc.proxy.counts().sub(before)
	m.resent = w.resent.Load()
	after, err := scrape(ctx, d.metricsURL())
	if err != nil {
		return m, err
	}
	relists, watchStarts := after.sum("informerd_upstream_relists_total", pods), after.sum("informerd_upstream_watch_starts_total", pods)
	if warm {
		if lists := m.up.requests[upList] + m.up.requests[upStreamingList]; lists != 0 {
			m.anomalies = append(m.anomalies, fmt.Sprintf("the warm start sent %d pod lists to kube-apiserver", lists))
		}
		if relists != 0 {
			m.anomalies = append(m.anomalies, fmt.Sprintf("the warm start relisted: informerd_upstream_relists_total %v (watch starts %v)", relists, watchStarts))
		}
		if m.clients.outOfRange != 0 {
			m.anomalies = append(m.anomalies, fmt.Sprintf("%d of %d watchers were refused with OUT_OF_RANGE after the warm start", m.clients.outOfRange, rc.watchers))
		}
		if e := after.sum("informerd_state_write_errors_total", pods); e != 0 {
			m.anomalies = append(m.anomalies, fmt.Sprintf("informerd_state_write_errors_total %v", e))
		}
	}
	w.close()

	// The cost of the writes, with or without --state-dir.
	time.Sleep(time.Second)
	beforePhase, err := scrape(ctx, d.metricsURL())
	if err != nil {
		return m, err
	}
	meter := meterCPU(d.pid())
	acks, err := churn(ctx, b.cluster, rc.ns, rc.pods, rc.nodes, 100, b.restartPhase)
	if err != nil {
		return m, err
	}
	time.Sleep(stateSettle)
	cpu, _ := meter.stop()
	if len(acks) == 0 {
		return m, fmt.Errorf("no write acknowledged in the 100 writes/s phase")
	}
	afterPhase, err := scrape(ctx, d.metricsURL())
	if err != nil {
		return m, err
	}
	m.cpuPerWrite = cpu[0] / float64(len(acks))
	m.writeTimePerWrite = (afterPhase.sum("informerd_state_write_seconds_total", pods) - beforePhase.sum("informerd_state_write_seconds_total", pods)) / float64(len(acks))
	return m, d.stop()
}

// stateSize returns a bbolt file's size and the bytes up to its last page
// in use (its high-water mark, less the free pages below it). Informerd
// must have closed it.
func stateSize(path string) (file, data int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		st := db.Stats()
		data = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
		return nil
	})
	return fi.Size(), data, err
}

// podWrite is a write's resourceVersion and its pod's node.
type podWrite struct{ rv, node string }

// write patches count random pods of the case's namespace at 50 per
// second, one at a time, and returns what each wrote.
func (rc *restartCase) write(ctx context.Context, count int) ([]podWrite, error) {
	var out []podWrite
	start := time.Now()
	for n := range count {
		if d := time.Until(start.Add(time.Duration(n) * time.Second / 50)); d > 0 {
			time.Sleep(d)
		}
		i := rand.IntN(rc.pods)
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"bench/restart":"%d"}}}`, time.Now().UnixNano())
		p, err := rc.b.cluster.kube.CoreV1().Pods(rc.ns).Patch(ctx, podName(i), types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return out, err
		}
		out = append(out, podWrite{rv: p.ResourceVersion, node: nodeName(i, rc.nodes)})
	}
	return out, nil
}

// restartDaemon is an informerd process the restart scenario starts,
// stops and starts again on the same addresses, timing each start itself.
type restartDaemon struct {
	bin                   string
	args                  []string
	grpcAddr, metricsAddr string
	cmd                   *exec.Cmd
	exited                chan struct{}
	started               time.Time
}

func newRestartDaemon(bin, config, kubeconfig, stateDir string) (*restartDaemon, error) {
	d := &restartDaemon{bin: bin}
	var err error
	if d.grpcAddr, err = testenv.FreeAddr(); err != nil {
		return nil, err
	}
	if d.metricsAddr, err = testenv.FreeAddr(); err != nil {
		return nil, err
	}
	d.args = []string{"--config=" + config, "--kubeconfig=" + kubeconfig,
		"--grpc-address=" + d.grpcAddr, "--metrics-address=" + d.metricsAddr, "--log-level=warn",
		"--max-watches=100000", "--max-watches-per-identity=100000", "--watch-rate=1000000", "--watch-burst=1000000",
		"--list-rate=1000000", "--list-burst=1000000", "--max-streams-per-connection=100000"}
	if stateDir != "" {
		d.args = append(d.args, "--state-dir="+stateDir)
	}
	return d, nil
}

func (d *restartDaemon) metricsURL() string { return "http://" + d.metricsAddr + "/metrics" }

func (d *restartDaemon) pid() int { return d.cmd.Process.Pid }

func (d *restartDaemon) start() error {
	d.cmd = exec.Command(d.bin, d.args...)
	d.cmd.Stderr = os.Stderr
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("start informerd: %w", err)
	}
	exited := make(chan struct{})
	d.exited = exited
	go func() { _ = d.cmd.Wait(); close(exited) }()
	return nil
}

// serving is what a start measured when informerd first answered SERVING.
type serving struct {
	took    time.Duration
	cpu     float64
	peakRSS uint64
}

// waitServing polls informerd's gRPC health every 10 ms until it answers
// SERVING, then reads the process's CPU and peak RSS.
func (d *restartDaemon) waitServing(ctx context.Context, limit time.Duration) (serving, error) {
	conn, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1, MaxDelay: 10 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return serving{}, err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	for {
		select {
		case <-d.exited:
			return serving{}, fmt.Errorf("informerd exited at start: %v", d.cmd.ProcessState)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			st := serving{took: time.Since(d.started)}
			st.cpu, _ = cpuSeconds(d.pid())
			st.peakRSS, _ = peakRSSBytes(d.pid())
			return st, nil
		}
		if ctx.Err() != nil {
			return serving{}, ctx.Err()
		}
		if time.Since(d.started) > limit {
			return serving{}, fmt.Errorf("informerd not SERVING within %v", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resourceVersion is the pods' resourceVersion in informerd's cache.
func (d *restartDaemon) resourceVersion(ctx context.Context) (string, error) {
	conn, err := dial(d.grpcAddr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	resp, err := pb.NewCacheServiceClient(conn).ListResources(ctx, &pb.ListResourcesRequest{})
	if err != nil {
		return "", err
	}
	for _, r := range resp.GetResources() {
		if r.GetName() == "pods" {
			return r.GetResourceVersion(), nil
		}
	}
	return "", fmt.Errorf("informerd serves no pods")
}

// waitMetric polls informerd's metrics until ok says the pods' series
// are as wanted.
func (d *restartDaemon) waitMetric(ctx context.Context, limit time.Duration, what string, ok func(samples) bool) error {
	deadline := time.Now().Add(limit)
	for {
		s, err := scrape(ctx, d.metricsURL())
		if err == nil && ok(s) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last scrape error: %v)", what, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitStateWritten waits until informerd has written its state and nothing
// is left to write.
func (d *restartDaemon) waitStateWritten(ctx context.Context, limit time.Duration) error {
	pods := map[string]string{"resource": "pods"}
	return d.waitMetric(ctx, limit, "informerd's state written", func(s samples) bool {
		return s.sum("informerd_state_writes_total", pods) >= 1 && s.sum("informerd_state_lag_events", pods) == 0
	})
}

// waitConfirmed waits until the API server has confirmed the restored
// cache.
func (d *restartDaemon) waitConfirmed(ctx context.Context, limit time.Duration) error {
	pods := map[string]string{"resource": "pods"}
	return d.waitMetric(ctx, limit, "the API server's confirmation of the restored cache (informerd_cache_restored 0)", func(s samples) bool {
		return s.sum("informerd_cache_restored", pods) == 0 && s.sum("informerd_cache_synced", pods) == 1
	})
}

// stop ends informerd with SIGTERM and waits for it to exit (SIGKILL after
// 30 s).
func (d *restartDaemon) stop() error {
	if d.cmd == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.kill()
		return fmt.Errorf("informerd did not exit within 30 s of SIGTERM")
	}
	d.cmd = nil
	return nil
}

// kill ends informerd with SIGKILL if it is still running.
func (d *restartDaemon) kill() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.cmd = nil
}
