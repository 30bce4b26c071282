package client_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// outages is an informerd that goes down and comes back: while down, a
// Watch is refused with UNAVAILABLE and the open streams break with it;
// while up, a stream sends a BOOKMARK at the next resourceVersion every
// 100 ms. No network: it runs inside a synctest bubble. Its methods may be
// called concurrently.
type outages struct {
	pb.CacheServiceClient // nil: only List and Watch are called

	mu     sync.Mutex
	down   bool
	broken chan struct{} // closed when it goes down
	rv     int
}

func newOutages() *outages { return &outages{broken: make(chan struct{})} }

func (o *outages) setDown(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if down && !o.down {
		close(o.broken)
	} else if !down && o.down {
		o.broken = make(chan struct{})
	}
	o.down = down
}

var unavailable = status.Error(codes.Unavailable, "connection refused")

func (o *outages) List(context.Context, *pb.ListRequest, ...grpc.CallOption) (*pb.ListResponse, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return nil, unavailable
	}
	return &pb.ListResponse{ResourceVersion: strconv.Itoa(o.rv)}, nil
}

func (o *outages) Watch(ctx context.Context, req *pb.WatchRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchResponse], error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return nil, unavailable
	}
	s := &outageStream{ctx: ctx, o: o, broken: o.broken, tick: time.NewTicker(100 * time.Millisecond)}
	if req.GetSendInitialEvents() {
		s.first = &pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, ResourceVersion: strconv.Itoa(o.rv)}
	}
	return s, nil
}

// outageStream is one Watch stream of outages.
type outageStream struct {
	grpc.ClientStream // nil: only Header and Recv are called
	ctx               context.Context
	o                 *outages
	broken            <-chan struct{}
	tick              *time.Ticker
	first             *pb.WatchResponse
}

func (s *outageStream) Header() (metadata.MD, error) { return metadata.MD{}, nil }

func (s *outageStream) Recv() (*pb.WatchResponse, error) {
	if f := s.first; f != nil {
		s.first = nil
		return f, nil
	}
	select {
	case <-s.ctx.Done():
		s.tick.Stop()
		return nil, status.FromContextError(s.ctx.Err()).Err()
	case <-s.broken:
		s.tick.Stop()
		return nil, unavailable
	case <-s.tick.C:
		s.o.mu.Lock()
		s.o.rv++
		rv := s.o.rv
		s.o.mu.Unlock()
		return &pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_BOOKMARK, ResourceVersion: strconv.Itoa(rv)}, nil
	}
}

// TestRecoveryAcrossOutages runs client-go's Reflector on a ListWatch
// through six outages of informerd, each 3 s long and followed by 10 s of
// health, and measures each recovery: from informerd's return to the
// reflector's next resourceVersion. The ListWatch's own retries draw the
// middle of each window (SetJitter), so each outage is retried at
// 0.5 s, 1.5 s and 3.5 s: every recovery takes 0.6 s. With NoRetry the
// refusals reach client-go's Reflector, whose backoff resets only 2
// minutes after its previous reset, so each recovery is slower than the
// one before until then: the leaves' 5 s to 54 s of issue 36.
func TestRecoveryAcrossOutages(t *testing.T) {
	tests := []struct {
		name    string
		noRetry bool
		check   func(t *testing.T, recoveries []time.Duration)
	}{
		{name: "the ListWatch's backoff", check: func(t *testing.T, recoveries []time.Duration) {
			for i, r := range recoveries {
				if r < 600*time.Millisecond || r > 620*time.Millisecond {
					t.Errorf("recovery %d took %v, want 600ms (retried at 3.5 s, the bookmark 100 ms after)", i+1, r)
				}
			}
		}},
		{name: "client-go's backoff (NoRetry)", noRetry: true, check: func(t *testing.T, recoveries []time.Duration) {
			// client-go's n-th wait is drawn from [0.8 s·2^n, 1.6 s·2^n),
			// capped at [30 s, 60 s), and n goes back to 0 only at the
			// first failure 2 minutes after the last reset: recoveries
			// grow until then (a sawtooth).
			slowest := slices.Max(recoveries)
			if slowest < 4*recoveries[0] || slowest < 10*time.Second {
				t.Errorf("with client-go's backoff the recoveries were %v: none was 4 times slower than the first; has client-go's Reflector changed its backoff? (internal/reflector/retry.go)", recoveries)
			}
		}},
	}
	defer client.SetJitter(func(n int64) int64 { return n / 2 })()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newOutages()
				lw, err := client.NewListWatch(up, &corev1.ConfigMap{}, client.Options{Resource: "configmaps", NoRetry: tc.noRetry})
				if err != nil {
					t.Fatal(err)
				}
				r := cache.NewReflectorWithOptions(lw, &corev1.ConfigMap{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); r.RunWithContext(ctx) }()
				defer func() { cancel(); <-done }()
				at := func() int {
					n, _ := strconv.Atoi(r.LastSyncResourceVersion())
					return n
				}
				time.Sleep(10 * time.Second)
				var recoveries []time.Duration
				for range 6 {
					up.setDown(true)
					time.Sleep(3 * time.Second)
					before := at()
					up.setDown(false)
					back := time.Now()
					for at() <= before {
						time.Sleep(10 * time.Millisecond)
					}
					recoveries = append(recoveries, time.Since(back).Truncate(10*time.Millisecond))
					time.Sleep(10 * time.Second)
				}
				t.Logf("recoveries: %v", recoveries)
				tc.check(t, recoveries)
			})
		})
	}
}
