package chaos_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

// TestSIGKILLWithState kills informerd with SIGKILL in the middle of
// writes while 500 clients watch it, and starts it again on its
// --state-dir while the writes go on. Every client resumes from its own
// resourceVersion: none gets OUT_OF_RANGE, none sees a gap, a duplicate or
// a resourceVersion going back, and each ends holding exactly the API
// server's objects. The restarted informerd does not list: it resumes its
// watch from the saved resourceVersion, and the changes it had not written
// before the kill come again from there.
func TestSIGKILLWithState(t *testing.T) {
	const ns, clients = "sigkill-state", 500
	seed := uint64(time.Now().UnixNano())
	// A writer not held back by client-go's default rate limit (5/s), so
	// that many changes happen while informerd is down.
	wc := rest.CopyConfig(env.Config)
	wc.QPS, wc.Burst = 1000, 1000
	s := &suite{t: t, kube: kubernetes.NewForConfigOrDie(wc), rng: rand.New(rand.NewPCG(seed, seed)), ns: ns}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := testenv.BuildInformerd(dir)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("resources:\n  - resource: configmaps\n    namespace: "+ns+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := testenv.StartDaemon(bin, config, kubeconfig, "--state-dir="+filepath.Join(dir, "state"),
		"--watch-rate=100000", "--watch-burst=100000", "--max-watches-per-identity=100000", "--list-rate=100000", "--list-burst=100000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	conn, err := dial(d.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	replicas := []pb.CacheServiceClient{pb.NewCacheServiceClient(conn)}

	writing := make(chan bool, 1)
	var wg sync.WaitGroup
	wctx, stopWriter := context.WithCancel(ctx)
	wg.Go(func() { s.write(wctx, writing) })
	defer func() { stopWriter(); wg.Wait() }()
	cctx, stopClients := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	defer func() { stopClients(); cwg.Wait() }()
	for i := range clients {
		w := newWatcher(i, ns, replicas)
		s.watchers = append(s.watchers, w)
		cwg.Go(func() { w.run(cctx) })
	}
	writing <- true
	testenv.Eventually(t, time.Minute, "every client to list and watch", func() bool {
		for _, w := range s.watchers {
			if _, rv, _ := w.snapshot(); rv == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	d.Kill()
	killed, atKill := time.Now(), s.apiServerRV()
	// Writes go on while it is down: at least 10 changes it must catch up.
	testenv.Eventually(t, time.Minute, "10 changes while informerd is down", func() bool {
		return s.apiServerRV() >= atKill+10
	})
	atRestart := s.apiServerRV()
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("informerd restarted from its --state-dir %v after the SIGKILL; the API server moved from resourceVersion %d to %d meanwhile",
		time.Since(killed).Round(time.Millisecond), atKill, atRestart)
	time.Sleep(2 * time.Second)
	writing <- false
	s.check()
	m := scrape("http://" + d.MetricsAddr + "/metrics")
	if got := m["informerd_upstream_relists_total"]; got != 0 {
		t.Errorf("the restarted informerd listed %g times, want 0", got)
	}
	if got := m["informerd_cache_restored"]; got != 0 {
		t.Errorf("informerd_cache_restored is %g once the watch resumed, want 0", got)
	}
	relists, resumes := 0, 0
	for _, w := range s.watchers {
		w.mu.Lock()
		relists += w.relists
		resumes += w.resumes
		w.mu.Unlock()
	}
	t.Logf("%d clients: %d resumes, %d OUT_OF_RANGE", clients, resumes, relists)
	if relists != 0 {
		t.Errorf("%d clients got OUT_OF_RANGE after the restart, want 0", relists)
	}
	if resumes < clients {
		t.Errorf("%d resumes for %d clients: the kill did not reach every client", resumes, clients)
	}
}

// apiServerRV is the API server's current resourceVersion for the suite's
// namespace.
func (s *suite) apiServerRV() uint64 {
	s.t.Helper()
	l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		s.t.Fatal(err)
	}
	rv, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
	return rv
}
