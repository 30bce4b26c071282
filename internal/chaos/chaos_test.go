// Package chaos_test injects real faults on loopback — a cut upstream, a
// killed kube-apiserver, a compacted etcd, a killed informerd replica, a
// reconnect storm, stalled clients — while clients watch two informerd
// replicas and two leaf informerds over them (--upstream-informerd, each
// taking one part), and checks after each that every client's view is
// exactly the API server's (its part's, for a leaf's client).
//
// `make test` runs each fault once in a fixed order. `make chaos` runs a
// random schedule for CHAOS_DURATION (default 20m) with CHAOS_SEED (printed;
// set it to replay a failure) and CHAOS_CLIENTS clients (default 1000);
// both passes add CHAOS_LEAF_CLIENTS clients of the leaves (default 200).
package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const ns = "chaos"

// suite is the system under fault: the API server, two informerd replicas
// each behind its own fault proxy, two leaves over the replicas, a writer
// and the clients.
type suite struct {
	t        *testing.T
	ns       string
	kube     *kubernetes.Clientset
	proxies  []*testenv.Proxy
	replicas []*testenv.Daemon
	leaves   []*testenv.Daemon // one per part
	watchers []*watcher        // the replicas' clients and the leaves'
	rng      *rand.Rand
	log      []string
	onKilled int // clients on the replica the last replica fault killed

	// leafClients are clients of the leaves, in the order of parts.
	leafClients []pb.CacheServiceClient
	// bin, dir and kubeconfig start another leaf (recovery_test.go).
	bin, dir, kubeconfig string
	// rootKills is how many times in a row the recovery fault kills both
	// replicas; recovery is what it found.
	rootKills int
	recovery  error

	// compressed is replica 0's client: that replica compresses its cold
	// objects (--cache-compression-min-objects=1), and its List is
	// compared, contents included, with the API server after every fault.
	compressed pb.CacheServiceClient
	// coldSeen is the most cold objects replica 0 was seen to hold.
	coldSeen float64
}

// busiest returns the replica with the most clients, and how many.
func (s *suite) busiest() (replica, clients int) {
	counts := make([]int, len(s.replicas))
	for _, w := range s.watchers {
		if w.part != "" {
			continue // a leaf's
		}
		w.mu.Lock()
		counts[w.replica]++
		w.mu.Unlock()
	}
	for i, c := range counts {
		if c > counts[replica] {
			replica = i
		}
	}
	return replica, counts[replica]
}

func (s *suite) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	s.t.Log(line)
	s.log = append(s.log, line)
}

// fault is one kind of fault; it returns once the fault has been healed.
type fault struct {
	name string
	run  func(s *suite) error
	// expect checks the story the metrics and clients tell (deltas over
	// the fault), or is nil.
	expect func(s *suite, d movement) error
}

// movement is how counters moved over one fault: summed over both
// replicas, over both leaves, over the replicas' clients and over the
// leaves' clients.
type movement struct {
	relists, watchStarts, streamsEnded float64
	clientResumes, clientRelists       int
	// relistsAfter is the relists counted at the end, not a difference:
	// after a replica restarts its counters start again.
	relistsAfter float64

	leafRelists, leafWatchStarts         float64
	leafClientResumes, leafClientRelists int
	leafRelistsAfter                     float64 // at the end, as relistsAfter
}

func atLeast(what string, got, want float64) error {
	if got < want {
		return fmt.Errorf("%s moved by %g, want at least %g", what, got, want)
	}
	return nil
}

var faults = []fault{
	{"upstream cut for 3s (every connection reset, new ones refused)", func(s *suite) error {
		for _, p := range s.proxies {
			p.Cut()
		}
		time.Sleep(3 * time.Second)
		for _, p := range s.proxies {
			p.Restore()
		}
		return nil
	}, func(s *suite, d movement) error {
		return atLeast("informerd_upstream_watch_starts_total", d.watchStarts, 2)
	}},
	{"200ms of latency each way on the upstream for 5s", func(s *suite) error {
		for _, p := range s.proxies {
			p.SetLatency(200 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		for _, p := range s.proxies {
			p.SetLatency(0)
		}
		return nil
	}, nil},
	{"kube-apiserver killed with SIGKILL and restarted", func(s *suite) error { return env.KillAPIServer() }, func(s *suite, d movement) error {
		return atLeast("informerd_upstream_watch_starts_total", d.watchStarts, 2)
	}},
	{"etcd compacted past every resourceVersion, kube-apiserver restarted (forces relists)", func(s *suite) error {
		return env.KillAPIServer(func() error { _, err := env.CompactEtcd(); return err })
	}, func(s *suite, d movement) error {
		return atLeast("informerd_upstream_relists_total", d.relists, 1)
	}},
	{"etcd restarted", func(s *suite) error { return env.RestartEtcd() }, nil},
	{"20 clients vanish without closing (their connections go silent)", func(s *suite) error {
		before := scrape("http://" + s.replicas[0].MetricsAddr + "/metrics")["informerd_watchers"]
		p, err := testenv.NewProxyTo(s.replicas[0].GRPCAddr)
		if err != nil {
			return err
		}
		defer p.Close()
		conn, err := dial(p.Addr())
		if err != nil {
			return err
		}
		defer conn.Close()
		c := pb.NewCacheServiceClient(conn)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range 20 {
			w, err := c.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: ns}})
			if err == nil {
				_, err = w.Header()
			}
			if err != nil {
				return err
			}
		}
		watchers := func() float64 {
			return scrape("http://" + s.replicas[0].MetricsAddr + "/metrics")["informerd_watchers"]
		}
		if !testenv.Poll(10*time.Second, func() bool { return watchers() >= before+20 }) {
			return fmt.Errorf("the 20 watches never showed in informerd_watchers (%g, %g before)", watchers(), before)
		}
		p.Freeze() // nothing more goes through, nothing is closed
		// The replica pings the silent connection after --keepalive-time
		// and drops it after --keepalive-timeout (2s each here).
		if !testenv.Poll(30*time.Second, func() bool { return watchers() <= before }) {
			return fmt.Errorf("informerd_watchers is %g 30s after 20 clients went silent, %g before they came", watchers(), before)
		}
		return nil
	}, nil},
	{"the busier informerd replica killed with SIGKILL, its clients fail over, the replica restarted", func(s *suite) error {
		r, n := s.busiest()
		s.onKilled = n
		s.replicas[r].Kill()
		time.Sleep(2 * time.Second)
		return s.replicas[r].Restart()
	}, func(s *suite, d movement) error {
		return atLeast("client resumes", float64(d.clientResumes), float64(s.onKilled))
	}},
	{"each informerd replica killed with SIGKILL in turn and restarted: the leaves fail over to the other and resume", killEachRoot, expectTierFailover},
	{"both informerd replicas killed with SIGKILL mid-churn and restarted from their --state-dir", func(s *suite) error {
		for _, r := range s.replicas {
			r.Kill()
		}
		time.Sleep(time.Second) // writes go on while both are down
		for _, r := range s.replicas {
			if err := r.Restart(); err != nil {
				return err
			}
		}
		return nil
	}, func(s *suite, d movement) error {
		// Every client resumes from its own resourceVersion: the restored
		// history and the watch resumed upstream cover it.
		if d.clientRelists != 0 {
			return fmt.Errorf("%d clients got OUT_OF_RANGE and listed again after a restart from --state-dir, want 0", d.clientRelists)
		}
		if d.relistsAfter != 0 {
			return fmt.Errorf("the restarted replicas listed %g times, want 0: they resume their watch from the saved resourceVersion", d.relistsAfter)
		}
		// The leaves wait for a replica and resume from their own
		// resourceVersion on it, as every client does.
		if d.leafRelists != 0 {
			return fmt.Errorf("the leaves listed again %g times, want 0: a leaf resumes from its resourceVersion once a replica is back", d.leafRelists)
		}
		return nil
	}},
	{"both informerd replicas killed with SIGKILL again and again (CHAOS_ROOT_KILLS times; 6 in make test, 10 otherwise), restarted from their --state-dir each time, healthy in between: the leaves' recovery does not grow", killRootsRepeatedly, expectSteadyRecovery},
	{"every client drops its stream and reconnects at once", func(s *suite) error {
		for _, w := range s.watchers {
			select {
			case w.reconnect <- struct{}{}:
			default:
			}
		}
		return nil
	}, func(s *suite, d movement) error {
		return atLeast("client resumes", float64(d.clientResumes+d.leafClientResumes), float64(len(s.watchers)))
	}},
	{"a tenth of the clients stall for 5s during writes", func(s *suite) error {
		for i, w := range s.watchers {
			if i%10 == 0 {
				select {
				case w.stall <- 5 * time.Second:
				default:
				}
			}
		}
		time.Sleep(6 * time.Second)
		return nil
	}, nil},
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestChaos(t *testing.T) {
	duration, _ := time.ParseDuration(os.Getenv("CHAOS_DURATION"))
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	clients := envInt("CHAOS_CLIENTS", 20)
	if duration > 0 {
		clients = envInt("CHAOS_CLIENTS", 1000)
	}
	leafClients := envInt("CHAOS_LEAF_CLIENTS", 200)
	s := &suite{t: t, ns: ns, kube: kubernetes.NewForConfigOrDie(env.Config), rng: rand.New(rand.NewPCG(seed, seed))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Objects no fault's writes touch: on replica 0 they leave the
	// history window and are compressed, so every List, relist, state
	// write and restore of it reads cold objects.
	for i := range staticObjects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("static-%d", i), Labels: map[string]string{"part": partOf(i)}},
			Data: map[string]string{"n": strconv.Itoa(i), "text": strings.Repeat("static object of the chaos suite ", 1+i%5)}}
		if _, err := s.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	bin, err := testenv.BuildInformerd(dir)
	if err != nil {
		t.Fatal(err)
	}
	var clientsOf []pb.CacheServiceClient
	for i := range 2 {
		// Replica 0 compresses: a short history window (objects leave it
		// 45 s after their last change) and no least size. Replica 1 keeps
		// the defaults: its cache is under the least size, so nothing of
		// it is compressed.
		cfg, compress := rootConfig(ns), "--cache-compression-min-objects=256"
		if i == 0 {
			cfg, compress = cfg+"history: {maxAge: 45s}\n", "--cache-compression-min-objects=1"
		}
		config := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", i))
		if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := testenv.NewProxy(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		kc, err := env.KubeConfigVia(p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := filepath.Join(dir, fmt.Sprintf("kubeconfig-%d", i))
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := testenv.StartDaemon(bin, config, kubeconfig, "--state-dir="+filepath.Join(dir, fmt.Sprintf("state-%d", i)), "--watch-rate=100000", "--watch-burst=100000", "--max-watches-per-identity=100000",
			"--list-rate=100000", "--list-burst=100000",
			"--keepalive-time=2s", "--keepalive-timeout=2s",
			// Integrity checks all the time: after any fault, each must
			// find the cache equal to the API server, or skip.
			"--consistency-check-interval=3s", "--consistency-check-page-size=7", "--consistency-check-page-interval=0",
			"--cache-compression=cold", compress)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Stop)
		conn, err := dial(d.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		s.proxies, s.replicas = append(s.proxies, p), append(s.replicas, d)
		clientsOf = append(clientsOf, pb.NewCacheServiceClient(conn))
	}
	s.bin, s.dir, s.kubeconfig = bin, dir, filepath.Join(dir, "kubeconfig-0")
	s.compressed = clientsOf[0]
	// make test runs each fault once: fewer kills in a row there.
	s.rootKills = envInt("CHAOS_ROOT_KILLS", 10)
	if duration == 0 {
		s.rootKills = envInt("CHAOS_ROOT_KILLS", 6)
	}
	leaves := s.startLeaves(bin, dir, s.kubeconfig)
	baseline := s.processStats()

	// The writer: creates, updates and deletes among 40 names.
	writing := make(chan bool, 1)
	var wg sync.WaitGroup
	wctx, stopWriter := context.WithCancel(ctx)
	wg.Go(func() { s.write(wctx, writing) })
	defer func() { stopWriter(); wg.Wait() }()

	clientCtx, stopClients := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	for i := range clients {
		w := newWatcher(i, ns, clientsOf)
		s.watchers = append(s.watchers, w)
		cwg.Go(func() { w.run(clientCtx) })
	}
	for i := range leafClients {
		// A leaf's client stays on its leaf, which holds only its part.
		w := newWatcher(clients+i, ns, leaves[i%len(leaves):i%len(leaves)+1])
		w.part = parts[i%len(leaves)]
		s.watchers = append(s.watchers, w)
		cwg.Go(func() { w.run(clientCtx) })
	}
	t.Logf("chaos: %d clients on 2 replicas, %d on 2 leaves over them; seed %d (CHAOS_SEED=%d replays this schedule)", clients, leafClients, seed, seed)

	var checksMatched float64 // the most matches a replica counted
	run := func(f fault) {
		before := s.counters()
		writing <- true
		start := time.Now()
		time.Sleep(time.Second) // the fault strikes while writes flow
		if err := f.run(s); err != nil {
			t.Fatalf("fault %q: %v", f.name, err)
		}
		time.Sleep(2 * time.Second)
		writing <- false
		recovered := s.check()
		d := s.counters().minus(before)
		s.logf("fault %q: every client exact again %v after the fault began; upstream relists +%g, watch starts +%g, streams ended +%g; client resumes +%d, relists +%d; "+
			"leaves: upstream relists +%g (%g in all), watch starts +%g; their clients' resumes +%d, relists +%d",
			f.name, recovered.Sub(start).Round(100*time.Millisecond), d.relists, d.watchStarts, d.streamsEnded, d.clientResumes, d.clientRelists,
			d.leafRelists, d.leafRelistsAfter, d.leafWatchStarts, d.leafClientResumes, d.leafClientRelists)
		if f.expect != nil {
			if err := f.expect(s, d); err != nil {
				t.Errorf("fault %q: %v", f.name, err)
			}
		}
		for i, r := range s.replicas {
			url := "http://" + r.MetricsAddr + "/metrics"
			if n := scrapeSeries(url, "informerd_cache_consistency_checks_total", `result="mismatch"`); n > 0 {
				t.Errorf("fault %q: replica %d: %g integrity checks found its cache different from the API server", f.name, i, n)
			}
			checksMatched = max(checksMatched, scrapeSeries(url, "informerd_cache_consistency_checks_total", `result="match"`))
			if n := scrapeSeries(url, "informerd_cache_damaged_objects_total", ""); n > 0 {
				t.Errorf("fault %q: replica %d: %g reads found a cold object damaged", f.name, i, n)
			}
		}
		s.coldSeen = max(s.coldSeen, scrapeSeries("http://"+s.replicas[0].MetricsAddr+"/metrics", "informerd_cache_stored_objects", `state="cold"`))
	}
	if duration == 0 {
		for _, f := range faults {
			run(f)
		}
	} else {
		for end := time.Now().Add(duration); time.Now().Before(end); {
			run(faults[s.rng.IntN(len(faults))])
		}
	}

	if checksMatched == 0 {
		t.Error("no integrity check of a replica's cache ever matched: the checks prove nothing")
	}
	s.logf("integrity checks: up to %g matched on a replica between two restarts, none found a difference", checksMatched)
	if s.coldSeen == 0 {
		t.Error("replica 0 never held a compressed object: the suite did not exercise --cache-compression")
	}
	s.logf("compression: replica 0 held up to %g cold objects; its List equalled the API server's objects, contents included, after every fault", s.coldSeen)

	// Clients leave: goroutines and heap come back near where they began.
	stopClients()
	cwg.Wait()
	// A replica restarted by a fault starts its count again, and the
	// leaves may have moved to it: 15 goroutines of slack, under the 20
	// a leak of one goroutine per client would leave.
	var leaking []int
	if !testenv.Poll(2*time.Minute, func() bool {
		leaking = nil
		for i, st := range s.processStats() {
			if st.goroutines > baseline[i].goroutines+15 {
				leaking = append(leaking, i)
			}
		}
		return len(leaking) == 0
	}) {
		for _, i := range leaking {
			t.Errorf("replica %d: goroutines did not return to their baseline of %d within 2m after the clients left; its goroutines:\n%s",
				i, baseline[i].goroutines, goroutineDump("http://"+s.replicas[i].MetricsAddr))
		}
	}
	after := s.processStats()
	for i := range after {
		s.logf("replica %d: %d goroutines and %.1f MiB live heap at start, %d and %.1f MiB after the clients left",
			i, baseline[i].goroutines, baseline[i].heap/(1<<20), after[i].goroutines, after[i].heap/(1<<20))
		if after[i].heap > baseline[i].heap+32<<20 {
			t.Errorf("replica %d: live heap %.1f MiB after the clients left, %.1f MiB at start", i, after[i].heap/(1<<20), baseline[i].heap/(1<<20))
		}
	}
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		_ = os.WriteFile(out, []byte(fmt.Sprintf("seed %d, %d clients, %v\n%s\n", seed, clients, duration, strings.Join(s.log, "\n"))), 0o644)
	}
}

// write runs create/update/delete operations while told to.
func (s *suite) write(ctx context.Context, writing <-chan bool) {
	on := false
	n := 0
	for {
		if !on {
			select {
			case <-ctx.Done():
				return
			case on = <-writing:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case on = <-writing:
			continue
		case <-time.After(20 * time.Millisecond):
		}
		n++
		i := s.rng.IntN(40)
		meta := metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"part": partOf(i)}}
		cms := s.kube.CoreV1().ConfigMaps(s.ns)
		var err error
		switch s.rng.IntN(3) {
		case 0:
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"n": strconv.Itoa(n)}}, metav1.CreateOptions{})
		case 1:
			_, err = cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"n": strconv.Itoa(n)}}, metav1.UpdateOptions{})
		default:
			err = cms.Delete(ctx, meta.Name, metav1.DeleteOptions{})
		}
		// Conflicts (create of an existing name), misses (update or delete
		// of a missing one) and a missing API server are part of the game.
		_ = err
	}
}

// check waits until every client holds exactly the API server's objects
// (of its part, for a leaf's client), resourceVersions included, and fails
// on any violation a client recorded. It returns when that was first true.
func (s *suite) check() time.Time {
	s.t.Helper()
	ctx := context.Background()
	// A sentinel write in each part marks the point every client must
	// reach: a leaf's client sees only its part's.
	rv := map[string]uint64{} // by part; "" is the whole namespace
	for _, part := range parts {
		name := "sentinel-" + part
		sentinel := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"part": part}}, Data: map[string]string{"at": time.Now().String()}}
		testenv.Eventually(s.t, 2*time.Minute, "the API server to take the sentinel write", func() bool {
			_ = s.kube.CoreV1().ConfigMaps(s.ns).Delete(ctx, name, metav1.DeleteOptions{})
			cm, err := s.kube.CoreV1().ConfigMaps(s.ns).Create(ctx, sentinel, metav1.CreateOptions{})
			if err != nil {
				return false
			}
			rv[part], _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
			rv[""] = max(rv[""], rv[part])
			return true
		})
	}
	list, err := s.kube.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	want := map[string]map[string]uint64{"": {}} // by part, as rv
	for _, part := range parts {
		want[part] = map[string]uint64{}
	}
	for _, cm := range list.Items {
		v, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		want[""][cm.Name] = v
		if part, ok := cm.Labels["part"]; ok && want[part] != nil {
			want[part][cm.Name] = v
		}
	}
	var diff string
	ok := testenv.Poll(3*time.Minute, func() bool {
		for _, w := range s.watchers {
			got, last, _ := w.snapshot()
			if last < rv[w.part] {
				diff = fmt.Sprintf("watcher %d is at resourceVersion %d, the sentinel of its part at %d", w.id, last, rv[w.part])
				return false
			}
			if d := compare(got, want[w.part]); d != "" {
				diff = fmt.Sprintf("watcher %d: %s", w.id, d)
				return false
			}
		}
		return true
	})
	if !ok {
		s.t.Fatalf("clients did not converge on the API server's state: %s", diff)
	}
	at := time.Now()
	for _, w := range s.watchers {
		if _, _, v := w.snapshot(); len(v) > 0 {
			s.t.Fatalf("%d violations, first: %s", len(v), v[0])
		}
	}
	if s.compressed != nil {
		s.checkContents(list.Items, rv[""])
	}
	return at
}

// staticObjects is how many configmaps the suite creates once and never
// writes again.
const staticObjects = 60

// checkContents lists the namespace from replica 0, whose cold objects are
// compressed, and compares every object with the API server's, contents
// included: a List decompresses each cold object.
func (s *suite) checkContents(want []corev1.ConfigMap, rv uint64) {
	s.t.Helper()
	var diff string
	ok := testenv.Poll(time.Minute, func() bool {
		resp, err := s.compressed.List(context.Background(), &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: s.ns}, MinResourceVersion: strconv.FormatUint(rv, 10)})
		if err != nil {
			diff = err.Error()
			return false
		}
		got := map[string]corev1.ConfigMap{}
		for _, o := range resp.GetObjects() {
			var cm corev1.ConfigMap
			if err := json.Unmarshal(o.GetJson(), &cm); err != nil {
				s.t.Fatalf("replica 0 served %s/%s as undecodable JSON: %v", o.GetNamespace(), o.GetName(), err)
			}
			got[cm.Name] = cm
		}
		if len(got) != len(want) {
			diff = fmt.Sprintf("%d objects, the API server has %d", len(got), len(want))
			return false
		}
		for _, w := range want {
			g := got[w.Name]
			if g.ResourceVersion != w.ResourceVersion || g.UID != w.UID || !maps.Equal(g.Data, w.Data) || !maps.Equal(g.Labels, w.Labels) {
				diff = fmt.Sprintf("%s: replica 0 has %+v, the API server %+v", w.Name, g.ObjectMeta, w.ObjectMeta)
				return false
			}
		}
		return true
	})
	if !ok {
		s.t.Fatalf("replica 0's List (cold objects decompressed) differs from the API server: %s", diff)
	}
}

func compare(got, want map[string]uint64) string {
	for k, v := range want {
		if g, ok := got[k]; !ok {
			return fmt.Sprintf("missing %s (at %d)", k, v)
		} else if g != v {
			return fmt.Sprintf("%s at %d, the API server has %d", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("holds %s, which the API server has deleted", k)
		}
	}
	return ""
}

// counters reads the replicas', leaves' and clients' counters.
func (s *suite) counters() movement {
	var m movement
	for _, d := range s.replicas {
		metrics := scrape("http://" + d.MetricsAddr + "/metrics")
		m.relists += metrics["informerd_upstream_relists_total"]
		m.watchStarts += metrics["informerd_upstream_watch_starts_total"]
		m.streamsEnded += metrics["informerd_watch_streams_ended_total"]
	}
	for _, d := range s.leaves {
		metrics := scrape("http://" + d.MetricsAddr + "/metrics")
		m.leafRelists += metrics["informerd_upstream_relists_total"]
		m.leafWatchStarts += metrics["informerd_upstream_watch_starts_total"]
	}
	for _, w := range s.watchers {
		w.mu.Lock()
		if w.part == "" {
			m.clientResumes += w.resumes
			m.clientRelists += w.relists
		} else {
			m.leafClientResumes += w.resumes
			m.leafClientRelists += w.relists
		}
		w.mu.Unlock()
	}
	return m
}

func (m movement) minus(b movement) movement {
	return movement{
		relists: m.relists - b.relists, watchStarts: m.watchStarts - b.watchStarts, streamsEnded: m.streamsEnded - b.streamsEnded,
		clientResumes: m.clientResumes - b.clientResumes, clientRelists: m.clientRelists - b.clientRelists, relistsAfter: m.relists,
		leafRelists: m.leafRelists - b.leafRelists, leafWatchStarts: m.leafWatchStarts - b.leafWatchStarts,
		leafClientResumes: m.leafClientResumes - b.leafClientResumes, leafClientRelists: m.leafClientRelists - b.leafClientRelists,
		leafRelistsAfter: m.leafRelists,
	}
}

// scrapeSeries sums the series of the metric name whose labels contain
// label (`result="mismatch"`). A replica that is down reads as 0.
func scrapeSeries(url, name, label string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		labels, rest, ok := strings.Cut(strings.TrimPrefix(line, name+"{"), "} ")
		if !ok || !strings.HasPrefix(line, name+"{") || !strings.Contains(labels, label) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// scrape sums each metric's series by name (labels dropped). A replica
// that is down reads as nothing.
func scrape(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			_, rest, _ = strings.Cut(line, "} ")
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

type stats struct {
	goroutines int
	heap       float64
}

// processStats reads each replica's goroutines and live heap (after a
// forced GC) from its metrics and pprof endpoints.
// goroutineDump returns a replica's goroutines grouped by stack
// (pprof's debug=1), or why it could not be read.
func goroutineDump(base string) string {
	resp, err := http.Get(base + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(b)
}

func (s *suite) processStats() []stats {
	var out []stats
	for _, d := range s.replicas {
		base := "http://" + d.MetricsAddr
		if resp, err := http.Get(base + "/debug/pprof/heap?gc=1"); err == nil {
			resp.Body.Close()
		}
		metrics := scrape(base + "/metrics")
		st := stats{goroutines: 1 << 30, heap: metrics["go_gc_heap_live_bytes"]}
		if g, ok := metrics["go_goroutines"]; ok {
			st.goroutines = int(g)
		}
		out = append(out, st)
	}
	return out
}
