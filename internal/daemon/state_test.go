package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/testenv"
)

// upstream records the requests informerd sends to the API server.
type upstream struct {
	mu   sync.Mutex
	reqs []string // "LIST path", "STREAMING-LIST path", "WATCH path?rv", "GET path"
}

func (u *upstream) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		q := r.URL.Query()
		kind := "GET"
		switch {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			kind = "STREAMING-LIST"
		case q.Get("watch") == "true":
			kind = "WATCH"
		case strings.HasSuffix(r.URL.Path, "/configmaps"):
			kind = "LIST"
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, kind+" "+r.URL.Path+" rv="+q.Get("resourceVersion"))
		u.mu.Unlock()
		return next.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// lists returns the lists (plain or streaming) of configmaps sent since the
// last reset, and resets.
func (u *upstream) lists() (lists, all []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range u.reqs {
		if strings.Contains(r, "/configmaps") && (strings.HasPrefix(r, "LIST ") || strings.HasPrefix(r, "STREAMING-LIST ")) {
			lists = append(lists, r)
		}
	}
	all, u.reqs = u.reqs, nil
	return lists, all
}

// stateEnv is an informerd with a --state-dir behind a fault proxy, which
// keeps the API server's address (part of the state's identity) the same
// across restarts, with every request it sends upstream recorded.
type stateEnv struct {
	t        *testing.T
	ns       string
	kube     *kubernetes.Clientset
	proxy    *testenv.Proxy
	upstream *upstream
	opts     daemon.Options
	log      *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newStateEnv(t *testing.T, ns string, configMaps int) *stateEnv {
	t.Helper()
	ctx := context.Background()
	ns = fmt.Sprintf("%s-%d", ns, time.Now().UnixNano()%1e6) // -count=N runs again
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range configMaps {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := testenv.NewProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s := &stateEnv{t: t, ns: ns, kube: kube, proxy: p, upstream: &upstream{}, log: &syncBuffer{}}
	rc := p.Config(env.Config)
	rc.Wrap(s.upstream.RoundTrip)
	o := daemon.NewOptions()
	o.Config = parse(t, "resources:\n  - resource: configmaps\n    namespace: "+ns+"\n")
	o.RestConfig = rc
	o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	o.ShutdownTimeout = 2 * time.Second
	o.StateDir = filepath.Join(t.TempDir(), "state")
	o.StateFlushInterval = 100 * time.Millisecond
	s.opts = o
	return s
}

// run starts informerd, logging into s.log, and returns a client of it.
func (s *stateEnv) run() (*daemon.Daemon, pb.CacheServiceClient, *grpc.ClientConn, func() error) {
	s.t.Helper()
	d, err := daemon.New(s.opts, slog.New(slog.NewTextHandler(s.log, nil)))
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	s.t.Cleanup(func() { _ = stop() })
	conn, err := grpc.NewClient(d.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return d, pb.NewCacheServiceClient(conn), conn, stop
}

// list returns name → resourceVersion of the namespace's configmaps.
func (s *stateEnv) list(c pb.CacheServiceClient) (map[string]string, string, error) {
	resp, err := c.List(context.Background(), &pb.ListRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: s.ns}})
	if err != nil {
		return nil, "", err
	}
	out := map[string]string{}
	for _, o := range resp.GetObjects() {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out, resp.GetResourceVersion(), nil
}

// apiServer returns name → resourceVersion as the API server has them.
func (s *stateEnv) apiServer() map[string]string {
	l, err := s.kube.CoreV1().ConfigMaps(s.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range l.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// change makes the writes a client must see after a restart: two updates,
// a delete and a create; it returns them as "TYPE name@rv".
func (s *stateEnv) change() []string {
	ctx := context.Background()
	cms := s.kube.CoreV1().ConfigMaps(s.ns)
	var out []string
	for _, name := range []string{"cm1", "cm2"} {
		cm, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "changed"}}, metav1.UpdateOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, "MODIFIED "+name+"@"+cm.ResourceVersion)
	}
	if err := cms.Delete(ctx, "cm3", metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
	out = append(out, "DELETED cm3")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "added"}}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return append(out, "ADDED added@"+cm.ResourceVersion)
}

// follow watches from rv and returns the events (bookmarks left out) up to
// and including the sentinel ADDED, which it creates once ready() says so.
func (s *stateEnv) follow(c pb.CacheServiceClient, rv string, ready func()) []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := c.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: s.ns}, ResourceVersion: rv, AllowBookmarks: true})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		s.t.Fatalf("watch from %s: %v\ninformerd's log:\n%s", rv, err, s.log)
	}
	ready()
	if _, err := s.kube.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sentinel"}}, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	var got []string
	last := uint64(0)
	for {
		ev, err := stream.Recv()
		if err != nil {
			s.t.Fatalf("watch from %s after %v: %v\ninformerd's log:\n%s", rv, got, err, s.log)
		}
		n, _ := strconv.ParseUint(ev.GetResourceVersion(), 10, 64)
		if n < last {
			s.t.Errorf("resourceVersion went back: %d after %d", n, last)
		}
		last = n
		o := ev.GetObject()
		switch ev.GetType() {
		case pb.EventType_EVENT_TYPE_BOOKMARK:
			continue
		case pb.EventType_EVENT_TYPE_DELETED:
			got = append(got, "DELETED "+o.GetName())
		default:
			got = append(got, strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")+" "+o.GetName()+"@"+o.GetResourceVersion())
		}
		if o.GetName() == "sentinel" {
			return got[:len(got)-1]
		}
	}
}

func readyz(t *testing.T, d *daemon.Daemon) health.Report {
	t.Helper()
	resp, err := http.Get(d.MetricsURL() + "/readyz?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep health.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func restored(t *testing.T, c pb.CacheServiceClient) bool {
	t.Helper()
	resp, err := c.ListResources(context.Background(), &pb.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetResources()[0].GetRestored()
}

// TestWarmRestart stops informerd gracefully, changes objects, cuts the API
// server off and starts informerd again: it serves the restored cache at
// once (health SERVING, /readyz and ListResources say Restored), a client
// watching from its last resourceVersion receives exactly the missed
// changes once the API server is back, and informerd never lists.
func TestWarmRestart(t *testing.T) {
	s := newStateEnv(t, "warm-restart", 6)
	d1, c1, _, stop1 := s.run()
	testenv.Eventually(t, time.Minute, "the first informerd to list", func() bool {
		got, _, err := s.list(c1)
		return err == nil && len(got) == 6
	})
	before, clientRV, _ := s.list(c1)
	if restored(t, c1) || readyz(t, d1).Resources[0].Phase != "Synced" {
		t.Errorf("a cold start says it is restored")
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	changes := s.change()
	s.proxy.Cut()
	s.upstream.lists()

	start := time.Now()
	d2, c2, conn2, _ := s.run()
	var served time.Duration
	testenv.Eventually(t, 10*time.Second, "List from the restored cache while the API server is cut off", func() bool {
		got, _, err := s.list(c2)
		if err != nil {
			return false
		}
		served = time.Since(start)
		if diff := cmp.Diff(before, got); diff != "" {
			t.Fatalf("the restored cache differs from the one stopped (-stopped +restored):\n%s", diff)
		}
		return true
	})
	t.Logf("List answered from the restored cache %v after start, with the API server cut off", served)
	hc, err := healthpb.NewHealthClient(conn2).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health while restored: %v %v, want SERVING", hc, err)
	}
	rep := readyz(t, d2)
	if r := rep.Resources[0]; !rep.Ready || r.Phase != "Restored" || r.RestoredAgeSeconds == nil || *r.RestoredAgeSeconds <= 0 {
		t.Errorf("/readyz while restored: %+v, want ready, phase Restored with its age", rep)
	}
	if !restored(t, c2) {
		t.Errorf("ListResources does not say the resource is restored")
	}

	got := s.follow(c2, clientRV, s.proxy.Restore)
	if diff := cmp.Diff(changes, got); diff != "" {
		t.Errorf("a client resuming from %s after the restart got (-want +got):\n%s", clientRV, diff)
	}
	testenv.Eventually(t, 30*time.Second, "the API server to confirm the restored cache", func() bool {
		return !restored(t, c2) && readyz(t, d2).Resources[0].Phase == "Synced"
	})
	testenv.Eventually(t, 10*time.Second, "the cache to equal the API server", func() bool {
		got, _, _ := s.list(c2)
		return cmp.Equal(got, s.apiServer())
	})
	if lists, all := s.upstream.lists(); len(lists) > 0 {
		t.Errorf("informerd listed after a warm restart: %v\nevery request: %v", lists, all)
	}
}

// TestRestartAfterCompaction restarts informerd after etcd compacted past
// its state's resourceVersion: the resumed watch is refused (410), and
// informerd lists once, diffed against the restored cache, so a client
// resuming from before the restart sees only the real changes.
func TestRestartAfterCompaction(t *testing.T) {
	s := newStateEnv(t, "compacted-restart", 6)
	_, c1, _, stop1 := s.run()
	testenv.Eventually(t, time.Minute, "the first informerd to list", func() bool {
		got, _, err := s.list(c1)
		return err == nil && len(got) == 6
	})
	_, clientRV, _ := s.list(c1)
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	changes := s.change()
	if err := env.KillAPIServer(func() error { _, err := env.CompactEtcd(); return err }); err != nil {
		t.Fatal(err)
	}
	s.upstream.lists()
	d2, c2, _, _ := s.run()
	testenv.Eventually(t, 10*time.Second, "the restored cache to be served", func() bool {
		_, _, err := s.list(c2)
		return err == nil
	})
	got := s.follow(c2, clientRV, func() {
		// The sentinel comes after the relist, not inside it.
		testenv.Eventually(t, time.Minute, "the relist", func() bool {
			r := readyz(t, d2).Resources[0]
			return r.Phase == "Synced" && r.Upstream != nil && r.Upstream.Relists == 1
		})
	})
	// A relist's changes come in resourceVersion order, its deletes last
	// (docs/api.md).
	want := append(slices.Clone(changes[:2]), changes[3], changes[2])
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a client resuming from %s after the restart got (-want +got):\n%s", clientRV, diff)
	}
	testenv.Eventually(t, 10*time.Second, "the cache to equal the API server", func() bool {
		got, _, _ := s.list(c2)
		return cmp.Equal(got, s.apiServer())
	})
	lists, all := s.upstream.lists()
	if len(lists) != 1 {
		t.Errorf("informerd sent %d lists after the restart, want 1: %v\nevery request: %v", len(lists), lists, all)
	}
	if r := readyz(t, d2).Resources[0]; r.Upstream == nil || r.Upstream.Relists != 1 || r.Phase != "Synced" {
		t.Errorf("/readyz after the relist: %+v, want Synced with 1 relist", r)
	}
}

// TestBadStateStartsCold: a damaged, truncated or foreign state is moved
// aside with the reason in the log and /readyz, and the cache starts cold.
func TestBadStateStartsCold(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, s *stateEnv, path string)
		reason string
	}{
		{"a flipped bit", func(t *testing.T, s *stateEnv, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Every copy: bbolt keeps stale ones in free pages.
			n := bytes.Count(b, []byte(`"name":"cm2"`))
			if n == 0 {
				t.Fatal("cm2 is not in the state file")
			}
			b = bytes.ReplaceAll(b, []byte(`"name":"cm2"`), []byte(`"name":"cM2"`))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "checksum mismatch"},
		{"truncated", func(t *testing.T, s *stateEnv, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"another configuration", func(t *testing.T, s *stateEnv, path string) {
			s.opts.Config = parse(t, "resources:\n  - resource: configmaps\n    namespace: "+s.ns+"\n    labelSelector: app=x\n")
		}, "another configuration"},
		{"another cluster", func(t *testing.T, s *stateEnv, path string) {
			rc := rest.CopyConfig(s.opts.RestConfig)
			rc.Host = strings.Replace(rc.Host, "127.0.0.1", "localhost", 1)
			s.opts.RestConfig = rc
		}, "another cluster"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStateEnv(t, fmt.Sprint("bad-state-", i), 4)
			_, c1, _, stop1 := s.run()
			testenv.Eventually(t, time.Minute, "the first informerd to list", func() bool {
				got, _, err := s.list(c1)
				return err == nil && len(got) == 4
			})
			if err := stop1(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, s, filepath.Join(s.opts.StateDir, "configmaps.db"))
			d2, c2, _, _ := s.run()
			testenv.Eventually(t, time.Minute, "a cold start to list", func() bool {
				got, _, err := s.list(c2)
				return err == nil && (len(got) == 4 || tc.name == "another configuration")
			})
			r := readyz(t, d2).Resources[0]
			if r.Phase != "Synced" || r.Upstream == nil || r.Upstream.Relists != 1 || r.State == nil || !strings.Contains(r.State.SetAside, tc.reason) {
				t.Errorf("/readyz after a bad state: %+v (state %+v), want Synced after 1 list, with the state set aside for %q", r, r.State, tc.reason)
			}
			if restored(t, c2) {
				t.Errorf("ListResources says a cold start is restored")
			}
			if log := s.log.String(); !strings.Contains(log, "the saved state cannot be used; starting cold") || !strings.Contains(log, tc.reason) {
				t.Errorf("the log does not say why the state was refused:\n%s", log)
			}
			aside, _ := filepath.Glob(filepath.Join(s.opts.StateDir, "aside", "configmaps-*.db"))
			if len(aside) != 1 {
				t.Errorf("aside/ holds %v, want the refused state", aside)
			}
			// The cold start writes a new state, which the next start restores.
			testenv.Eventually(t, 10*time.Second, "a new state to be written", func() bool {
				_, err := os.Stat(filepath.Join(s.opts.StateDir, "configmaps.db"))
				return err == nil
			})
		})
	}
}

// TestStateWriteFails: a write of the state that fails (here the file it
// writes is in the way: a directory) never stops serving; it is a warning
// on /readyz and a metric until a write succeeds.
func TestStateWriteFails(t *testing.T) {
	s := newStateEnv(t, "state-write-fails", 2)
	blocker := filepath.Join(s.opts.StateDir, "configmaps.db.new")
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, c, _, _ := s.run()
	testenv.Eventually(t, time.Minute, "List to answer", func() bool {
		got, _, err := s.list(c)
		return err == nil && len(got) == 2
	})
	testenv.Eventually(t, 30*time.Second, "/readyz to warn of the failed write", func() bool {
		r := readyz(t, d).Resources[0]
		return r.State != nil && r.State.Problem != ""
	})
	rep := readyz(t, d)
	if !rep.Ready || rep.Resources[0].Phase != "Synced" {
		t.Errorf("/readyz with a failing state write: %+v, want ready and Synced", rep)
	}
	_, text := getText(t, d.MetricsURL()+"/readyz")
	if !strings.Contains(text, "state-problem=") {
		t.Errorf("/readyz text does not show the failed write:\n%s", text)
	}
	_, metrics := getText(t, d.MetricsURL()+"/metrics")
	if !strings.Contains(metrics, `informerd_state_write_errors_total{resource="configmaps"}`) || strings.Contains(metrics, `informerd_state_write_errors_total{resource="configmaps"} 0`) {
		t.Errorf("informerd_state_write_errors_total does not count the failed write")
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the retried write to succeed and the warning to clear", func() bool {
		r := readyz(t, d).Resources[0]
		return r.State != nil && r.State.Problem == "" && r.State.WrittenResourceVersion != ""
	})
}

func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestRestoredCacheAndConsistentReads: a cache restored from --state-dir
// answers reads that accept any state (resourceVersion=0) at once, but no
// consistent read (resourceVersion unset) until the API server has
// confirmed it: those are the API server's 429 while it cannot be asked,
// and then the API server's current state, never the restored one.
func TestRestoredCacheAndConsistentReads(t *testing.T) {
	s := newStateEnv(t, "restored-consistent", 4)
	s.opts.KubeAPIAddress = "127.0.0.1:0"
	_, c1, _, stop1 := s.run()
	testenv.Eventually(t, time.Minute, "the first informerd to list", func() bool {
		got, _, err := s.list(c1)
		return err == nil && len(got) == 4
	})
	before, _, _ := s.list(c1)
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	s.change()
	s.proxy.Cut()

	d2, c2, _, _ := s.run()
	testenv.Eventually(t, 10*time.Second, "the restored cache to serve", func() bool {
		_, _, err := s.list(c2)
		return err == nil
	})
	path := d2.KubeAPIURL() + "/api/v1/namespaces/" + s.ns + "/configmaps"
	code, _, retry := kubeList(t, path)
	if code != http.StatusTooManyRequests || retry != "1" {
		t.Errorf("consistent list of a restored cache with the API server cut off: %d, Retry-After %q; want 429, 1", code, retry)
	}
	if code, got, _ := kubeList(t, path+"?resourceVersion=0"); code != http.StatusOK || !cmp.Equal(got, before) {
		t.Errorf("list with resourceVersion=0 of the restored cache: %d %v, want 200 %v", code, got, before)
	}

	s.proxy.Restore()
	want := s.apiServer()
	testenv.Eventually(t, 30*time.Second, "a consistent list once the API server is back", func() bool {
		code, got, _ := kubeList(t, path)
		if code == http.StatusOK && !cmp.Equal(got, want) {
			t.Fatalf("a consistent list answered %v, the API server has %v", got, want)
		}
		return code == http.StatusOK
	})
}

// kubeList lists configmaps at url (informerd's Kubernetes API, plaintext,
// no credentials) and returns the code, name → resourceVersion and the
// Retry-After header.
func kubeList(t *testing.T, url string) (int, map[string]string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l corev1.ConfigMapList
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]string{}
	for _, cm := range l.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return resp.StatusCode, out, resp.Header.Get("Retry-After")
}

// TestProgressReportsState: the figures the memory returner polls
// (Caches().Progress()) carry each resource's configured name and its
// durable state's, so that a whole-state write's end is seen there (the
// returner returns what the write's checkpoint held).
func TestProgressReportsState(t *testing.T) {
	const ns = "progress-state"
	namespaceWithConfigMap(t, ns)
	o := daemon.NewOptions()
	o.RestConfig = env.Config
	o.Config = parse(t, "resources: [{resource: configmaps, namespace: "+ns+"}]")
	o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	o.StateDir = filepath.Join(t.TempDir(), "state")
	d, _ := start(t, o)
	testenv.Eventually(t, time.Minute, "the first whole state written, in Progress", func() bool {
		p := d.Caches().Progress()
		return len(p) == 1 && p[0].Configured == "configmaps" && p[0].State != nil && p[0].State.FullWrites >= 1 && p[0].State.Bytes > 0
	})
}
