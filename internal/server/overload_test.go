package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
)

// TestWatchStorm: watches started all at once — a node reboot, a rollout,
// a restart of informerd — are all admitted with the default limits and
// --auth-mode none, without a client retrying: each connection is a client
// of its own, and the calls past its burst wait their turn instead of being
// refused. Each stream then receives the next change.
func TestWatchStorm(t *testing.T) {
	const ns = "storm"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts := testserver.Start(t, env.Config, ownerConfig(ns), testserver.Options{Server: server.Options{Limits: limits.New(limits.Options{})}})
	cms, _ := ts.Set().Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "configmaps to sync", func() bool { return cms.Cache().Stats().Synced })

	for _, tt := range []struct {
		name           string
		conns, watches int
	}{
		{"1,000 watches over 10 connections", 10, 1000},
		// Past the burst of 200: 100 wait their turn, 2 s at 50/s.
		{"300 watches over one connection", 1, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var clients []pb.CacheServiceClient
			for range tt.conns {
				clients = append(clients, dial(t, ts.Addr))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			streams := make([]pb.CacheService_WatchClient, tt.watches)
			errs := make([]error, tt.watches)
			var wg sync.WaitGroup
			for i := range tt.watches {
				wg.Go(func() {
					w, err := clients[i%tt.conns].Watch(ctx, &pb.WatchRequest{Resource: "configmaps"})
					if err == nil {
						err = admitted(w)
					}
					streams[i], errs[i] = w, err
				})
			}
			wg.Wait()
			refused := map[string]int{}
			for _, err := range errs {
				if err != nil {
					refused[status.Convert(err).Message()]++
				}
			}
			if len(refused) > 0 {
				t.Fatalf("of %d watches started at once, some were refused: %v", tt.watches, refused)
			}

			name := "next-" + fmt.Sprint(tt.watches)
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			recvCtx, stop := context.WithTimeout(ctx, time.Minute)
			defer stop()
			got := make([]string, tt.watches)
			for i, w := range streams {
				wg.Go(func() { got[i] = nextEvent(recvCtx, w) })
			}
			wg.Wait()
			missed := map[string]int{}
			for _, g := range got {
				if g != "ADDED "+name {
					missed[g]++
				}
			}
			if len(missed) > 0 {
				t.Errorf("streams that did not receive ADDED %s, by what they got instead: %v", name, missed)
			}
		})
	}
}

// nextEvent returns the type and name of the next event w receives, or the
// error that ended it.
func nextEvent(ctx context.Context, w pb.CacheService_WatchClient) string {
	type result struct {
		ev  *pb.WatchResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		ev, err := w.Recv()
		done <- result{ev, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return r.err.Error()
		}
		return r.ev.GetType().String()[len("EVENT_TYPE_"):] + " " + r.ev.GetObject().GetName()
	case <-ctx.Done():
		return "nothing before the test's deadline"
	}
}

// TestTightLoop: with --auth-mode none on a Unix socket, where every peer
// has the same address, a client that opens Watch calls as fast as it can
// gets its burst, then its calls wait their turn at its rate, and past its
// queue are refused with RESOURCE_EXHAUSTED and when to retry. Another
// connection is a client of its own: its watches are admitted at once while
// the flooder's queue is full, and every admitted stream keeps receiving.
func TestTightLoop(t *testing.T) {
	const ns = "tight-loop"
	obs := &observer{}
	// The flooder's turns come every 100 s: none comes during the test.
	f := serveUnix(t, ownerConfig(ns), server.Options{
		WatchQueueLength: 100,
		Limits:           limits.New(limits.Options{WatchRate: 0.01, WatchBurst: 5, MaxQueuedPerIdentity: 3, MaxQueueWait: time.Hour}),
		Observer:         obs,
	})
	if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms, _ := f.set.Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "configmaps to sync", func() bool { return cms.Cache().Stats().Synced })

	flooder := f.dial(t)
	floodCtx, stopFlood := context.WithCancel(context.Background())
	defer stopFlood()
	type result struct {
		w   pb.CacheService_WatchClient
		err error
	}
	results := make(chan result, 100)
	start := func() {
		go func() {
			w, err := flooder.Watch(floodCtx, &pb.WatchRequest{Resource: "configmaps"})
			if err == nil {
				err = admitted(w)
			}
			results <- result{w, err}
		}()
	}
	// 60 calls at once, then a call each time one is answered, to 100.
	for range 60 {
		start()
	}
	started := 60
	var admittedStreams []pb.CacheService_WatchClient
	got := map[string]int{}
	var retries []time.Duration
	for range 97 {
		r := <-results
		if r.err == nil {
			admittedStreams = append(admittedStreams, r.w)
			got["admitted"]++
		} else {
			st := status.Convert(r.err)
			got[st.Code().String()+" "+limitOf(st)]++
			retries = append(retries, retryAfter(st))
		}
		if started < 100 {
			start()
			started++
		}
	}
	want := map[string]int{"admitted": 5, "ResourceExhausted max-queued-per-identity": 92}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flooder's calls, by outcome (-want +got); 3 more wait their turn:\n%s", diff)
	}
	// Each refusal says when its turn would have come: after the three
	// waiting calls' turns, 100 s apart.
	for _, d := range retries {
		if d <= 300*time.Second || d > 400*time.Second {
			t.Errorf("a refusal's RetryInfo delay is %v, want (300s, 400s]", d)
			break
		}
	}
	if n := obs.limitHits(limits.MaxQueuedPerIdentity); n != 92 {
		t.Errorf("refusals counted by %s: %d, want 92", limits.MaxQueuedPerIdentity, n)
	}

	// Another connection, while the flooder's queue is full: its five
	// watches are its own burst, admitted at once.
	other := f.dial(t)
	otherCtx, stopOther := context.WithCancel(context.Background())
	defer stopOther()
	var others []pb.CacheService_WatchClient
	for i := range 5 {
		w, err := other.Watch(otherCtx, &pb.WatchRequest{Resource: "configmaps"})
		if err == nil {
			err = admitted(w)
		}
		if err != nil {
			t.Fatalf("the other connection's watch %d during the flood: %v", i, err)
		}
		others = append(others, w)
	}
	if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during-flood"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recvCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	for i, w := range append(others, admittedStreams...) {
		if got := nextEvent(recvCtx, w); got != "ADDED during-flood" {
			t.Errorf("stream %d got %q, want ADDED during-flood", i, got)
		}
	}

	// The three waiting calls are still waiting; when their client gives
	// up, they end.
	select {
	case r := <-results:
		t.Fatalf("a call past the flooder's queue returned %v, want it waiting its turn", r.err)
	default:
	}
	stopFlood()
	for range 3 {
		if r := <-results; status.Code(r.err) != codes.Canceled {
			t.Errorf("waiting call canceled by its client: got %v, want CANCELED", r.err)
		}
	}
}

// TestListTurn: a List past its client's rate waits its turn, or is
// refused at once when its turn comes after its deadline; the pages after
// the first are not counted; a waiting call ends when informerd stops.
func TestListTurn(t *testing.T) {
	const ns = "list-turn"
	f := serveUnix(t, ownerConfig(ns), server.Options{
		DefaultPageSize: 1,
		Limits:          limits.New(limits.Options{ListRate: 0.01, ListBurst: 2, MaxQueueWait: time.Hour}),
	})
	if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms, _ := f.set.Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "configmaps to sync", func() bool { return cms.Cache().Stats().Objects == 2 })

	c := f.dial(t)
	// A deadline far shorter than the 100 s to the next turn, far longer
	// than an answer takes.
	soon := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	list := func(ctx context.Context, token string) (*pb.ListResponse, error) {
		return c.List(ctx, &pb.ListRequest{Resource: "configmaps", ContinueToken: token})
	}
	first, err := list(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := soon()
	defer cancel()
	if _, err := list(ctx, first.GetContinueToken()); err != nil {
		t.Fatalf("second page: %v", err)
	}
	if _, err := list(context.Background(), ""); err != nil {
		t.Fatalf("second List, the burst's last: %v", err)
	}
	_, err = list(ctx, "")
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || limitOf(st) != limits.ListRate {
		t.Errorf("List whose turn comes after its deadline: got %v, want RESOURCE_EXHAUSTED naming %s", err, limits.ListRate)
	}
	if d := retryAfter(st); d <= 90*time.Second || d > 100*time.Second {
		t.Errorf("its RetryInfo delay is %v, want the next turn, (90s, 100s] away", d)
	}
	if _, err := f.dial(t).List(ctx, &pb.ListRequest{Resource: "configmaps"}); err != nil {
		t.Errorf("List of another connection: %v", err)
	}

	waiting := make(chan error, 1)
	go func() {
		_, err := list(context.Background(), "")
		waiting <- err
	}()
	f.srv.Stop()
	if st := status.Convert(<-waiting); st.Code() != codes.Unavailable || reason(st) != pb.ErrorReason_SHUTTING_DOWN.String() {
		t.Errorf("List waiting when informerd stops: got %v, want UNAVAILABLE %s", st.Err(), pb.ErrorReason_SHUTTING_DOWN)
	}
}

// limitOf names the limit in a status's ErrorInfo.
func limitOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()["limit"]
		}
	}
	return ""
}

// retryAfter returns the delay of a status's RetryInfo, or 0.
func retryAfter(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// unixFixture serves caches and a CacheService on a Unix socket, as
// informerd serves its sidecar's clients: every peer has the same address.
type unixFixture struct {
	srv  *server.Server
	set  *pipeline.Set
	kube *kubernetes.Clientset
	addr string
}

func serveUnix(t *testing.T, yaml string, opts server.Options) *unixFixture {
	t.Helper()
	set := runCaches(t, yaml)
	path := filepath.Join(t.TempDir(), "grpc.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(set, opts)
	gs := srv.NewGRPC(server.GRPCOptions{})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return &unixFixture{srv: srv, set: set, kube: kubernetes.NewForConfigOrDie(env.Config), addr: "unix://" + path}
}

// dial opens a connection of its own to the fixture.
func (f *unixFixture) dial(t *testing.T) pb.CacheServiceClient {
	t.Helper()
	return dial(t, f.addr)
}

// dial opens a connection to target, closed when the test ends.
func dial(t *testing.T, target string) pb.CacheServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewCacheServiceClient(conn)
}
