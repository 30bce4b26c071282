package server_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// headerIdentity names the caller by an "x-identity" metadata value: the
// limits are what is under test here; real authentication has its own test.
type headerIdentity struct{}

func (headerIdentity) Authenticate(ctx context.Context) (user.Info, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-identity"); len(v) == 1 {
		return &user.DefaultInfo{Name: v[0]}, nil
	}
	return nil, &auth.Error{Kind: auth.Unauthenticated, Msg: "no x-identity"}
}

// TestFlood: one client opening Watch streams as fast as it can, far past
// its limits, holds no more than its 50 streams: the calls past them get
// RESOURCE_EXHAUSTED naming the limit at once (a Watch that would be
// refused when its turn comes is refused before it waits), while a
// well-behaved client keeps receiving every change; memory and goroutines
// come back when the flood ends.
func TestFlood(t *testing.T) {
	const ns = "flood"
	obs := &observer{}
	f := serve(t, ownerConfig(ns), server.Options{
		MaxWatches:       300,
		WatchQueueLength: 100,
		Authenticator:    headerIdentity{},
		Limits:           limits.New(limits.Options{MaxWatchesPerIdentity: 50, WatchRate: 20, WatchBurst: 100}),
		Observer:         obs,
	})
	createNS(t, f, ns)
	cms, _ := f.set.Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "configmaps to sync", func() bool { return cms.Cache().Stats().Synced })
	as := func(id string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-identity", id)
	}

	// The well-behaved client: three watches.
	goodCtx, stopGood := context.WithCancel(as("good"))
	defer stopGood()
	var good []*stream
	for range 3 {
		good = append(good, openWatch(goodCtx, t, f, &pb.WatchRequest{Resource: "configmaps"}))
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	// The flood: 2,000 Watch calls from 20 goroutines, every stream kept
	// open until the end.
	floodCtx, stopFlood := context.WithCancel(as("flooder"))
	var mu sync.Mutex
	codesSeen := map[string]int{}
	var open []pb.CacheService_WatchClient
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 100 {
				w, err := f.client.Watch(floodCtx, &pb.WatchRequest{Resource: "configmaps"})
				if err == nil {
					err = admitted(w)
				}
				key := "admitted"
				if st := status.Convert(err); err != nil {
					key = st.Code().String() + " " + limitNamed(st.Message())
				}
				mu.Lock()
				codesSeen[key]++
				if err == nil {
					open = append(open, w)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	// While the flood holds its streams, the good client may still open one.
	if w, err := f.client.Watch(goodCtx, &pb.WatchRequest{Resource: "configmaps"}); err != nil {
		t.Errorf("good client's new watch during the flood: %v", err)
	} else if err := admitted(w); err != nil {
		t.Errorf("good client's new watch during the flood: %v", err)
	}
	// And the good client's changes arrive.
	for i := range 5 {
		if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("during-flood-%d", i)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range good {
		waitLen(t, s, 5)
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	t.Logf("flood of 2,000 Watch calls: %v; heap %d KiB before, %d KiB with the flood's streams open",
		codesSeen, before.HeapInuse>>10, during.HeapInuse>>10)

	// Streams are refused by some limit: only RESOURCE_EXHAUSTED, and some.
	refused := 0
	for k, n := range codesSeen {
		if k == "admitted" {
			if n > 50 {
				t.Errorf("%d streams admitted for one identity, past its limit of 50", n)
			}
			continue
		}
		if !strings.HasPrefix(k, "ResourceExhausted --") {
			t.Errorf("%d calls ended with %q, want RESOURCE_EXHAUSTED naming a limit", n, k)
		}
		refused += n
	}
	if refused < 2000-50 {
		t.Errorf("%d refused, want at least %d", refused, 2000-50)
	}
	if obs.limitHits(limits.MaxWatchesPerIdentity)+obs.limitHits(limits.WatchRate) != refused {
		t.Errorf("limit metric counted %d+%d refusals, want %d", obs.limitHits(limits.MaxWatchesPerIdentity), obs.limitHits(limits.WatchRate), refused)
	}
	// Bounded memory: the flood holds at most 50 streams, each a bounded
	// queue; 32 MiB is far above that and far below 2,000 unbounded ones.
	if grew := int64(during.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d MiB during the flood", grew>>20)
	}

	stopFlood()
	testenv.Eventually(t, time.Minute, "goroutines to return to their count before the flood", func() bool {
		return runtime.NumGoroutine() <= goroutines+5
	})
	// The flooder's streams were released: once its rate bucket has a token
	// again (20/s) it is admitted.
	testenv.Eventually(t, 10*time.Second, "the flooder to be admitted again after the flood", func() bool {
		time.Sleep(200 * time.Millisecond)
		w, err := f.client.Watch(as("flooder"), &pb.WatchRequest{Resource: "configmaps"})
		if err == nil {
			err = admitted(w)
		}
		return err == nil
	})
}

// admitted returns nil once the server sent the headers of an admitted
// watch, or the status of a refused one (which ends without headers).
func admitted(w pb.CacheService_WatchClient) error {
	md, err := w.Header()
	if err == nil && md == nil {
		_, err = w.Recv()
	}
	return err
}

// limitNamed picks the "--flag" a RESOURCE_EXHAUSTED message names.
func limitNamed(msg string) string {
	for _, f := range strings.Fields(msg) {
		if strings.HasPrefix(f, "(--") || strings.HasPrefix(f, "--") {
			return strings.Trim(f, "(),;")
		}
	}
	return "(no limit named)"
}

// TestRequestTooLarge: a request past MaxRequestBytes (4 KiB in the test
// fixture) is refused by grpc before any handler, and still counted, for
// every method, unary or streaming, and for the health service registered
// beside CacheService.
func TestRequestTooLarge(t *testing.T) {
	obs := &observer{}
	f := serve(t, ownerConfig("too-large"), server.Options{Observer: obs})
	ctx := context.Background()
	big := strings.Repeat("x", 8<<10)
	for i, tc := range []struct {
		name string
		call func() error
	}{
		{"Get", func() error {
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "configmaps", Namespace: "too-large", Name: big})
			return err
		}},
		{"List", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "configmaps", ContinueToken: big})
			return err
		}},
		{"Watch", func() error {
			w, err := f.client.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", ResourceVersion: big})
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}},
		{"Health.Check", func() error {
			_, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{Service: big})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
				t.Fatalf("got %v, want RESOURCE_EXHAUSTED for the message size", err)
			}
			testenv.Eventually(t, 10*time.Second, "the refusal to be counted", func() bool { return obs.limitHits("max-request-bytes") == i+1 })
		})
	}
}
