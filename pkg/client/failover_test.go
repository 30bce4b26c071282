package client_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// dying is a CacheService whose watches end with UNAVAILABLE right after
// informerd admits them, before any event, as when the replica serving
// them is killed at that moment: the client's stream breaks with
// UNAVAILABLE. A streaming list (send_initial_events) gets its end at
// resourceVersion 10 and then breaks; the first breaks watches from a
// resourceVersion break, later ones are held open. Its methods may be
// called concurrently.
type dying struct {
	pb.UnimplementedCacheServiceServer
	breaks int

	mu      sync.Mutex
	lists   int      // List calls and streaming lists
	resumes []string // the resourceVersion of each watch from one
}

func (d *dying) List(context.Context, *pb.ListRequest) (*pb.ListResponse, error) {
	d.mu.Lock()
	d.lists++
	d.mu.Unlock()
	return &pb.ListResponse{ResourceVersion: "10"}, nil
}

func (d *dying) Watch(req *pb.WatchRequest, stream pb.CacheService_WatchServer) error {
	broken := status.Error(codes.Unavailable, "the replica died")
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	if req.GetSendInitialEvents() {
		d.mu.Lock()
		d.lists++
		d.mu.Unlock()
		if err := stream.Send(&pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, ResourceVersion: "10"}); err != nil {
			return err
		}
		return broken
	}
	d.mu.Lock()
	d.resumes = append(d.resumes, req.GetResourceVersion())
	n := len(d.resumes)
	d.mu.Unlock()
	if n <= d.breaks {
		return broken
	}
	<-stream.Context().Done()
	return nil
}

func (d *dying) counts() (lists int, resumes []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lists, slices.Clone(d.resumes)
}

// TestWatchBrokenBeforeAnEvent runs client-go's reflector on watches that
// break before their first event. client-go takes a watch that closes
// within a second without an event for a failed one and lists again; a
// replica dying just after it admitted the watch is no reason to. The
// reflector lists once and watches again from that list's resourceVersion
// each time: a leaf informerd failing over between replicas does not
// relist. The ListWatch opens such a watch again itself; with NoRetry it
// sends the reflector a 429, which backs off and watches again.
func TestWatchBrokenBeforeAnEvent(t *testing.T) {
	tests := []struct {
		name             string
		disableWatchList bool
		noRetry          bool
	}{
		{name: "streaming list, broken at once after its end, then watches"},
		{name: "list, then watches", disableWatchList: true},
		{name: "NoRetry: streaming list, broken at once after its end, then watches", noRetry: true},
		{name: "NoRetry: list, then watches", disableWatchList: true, noRetry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &dying{breaks: 1}
			gs := grpc.NewServer()
			pb.RegisterCacheServiceServer(gs, srv)
			go func() { _ = gs.Serve(lis) }()
			t.Cleanup(gs.Stop)
			lw, err := client.NewListWatch(dial(t, lis.Addr().String()), &corev1.ConfigMap{},
				client.Options{Resource: "configmaps", DisableWatchList: tt.disableWatchList, NoRetry: tt.noRetry})
			if err != nil {
				t.Fatal(err)
			}
			r := cache.NewReflectorWithOptions(lw, &corev1.ConfigMap{}, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.RunWithContext(ctx) }()
			defer func() { cancel(); <-done }()

			testenv.Eventually(t, time.Minute, "the reflector to watch past the broken watches", func() bool {
				_, resumes := srv.counts()
				return len(resumes) > srv.breaks
			})
			lists, resumes := srv.counts()
			if lists != 1 {
				t.Errorf("the reflector listed %d times, want 1: a watch broken before its first event must not make it list again", lists)
			}
			for _, rv := range resumes {
				if rv != "10" {
					t.Errorf("the reflector watched from resourceVersions %v, want each from the list's, 10", resumes)
					break
				}
			}
		})
	}
}
