package client_test

import (
	"context"
	"net"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// admitting is a CacheService whose Watch admits every stream, as
// informerd does by sending headers at once, and holds it open until the
// client ends it. The watch's contexts are the client's alone, so a fake
// server is enough to see them.
type admitting struct {
	pb.UnimplementedCacheServiceServer
}

func (admitting) Watch(_ *pb.WatchRequest, stream pb.CacheService_WatchServer) error {
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// foreignContext is a context of a type the context package does not know,
// as a caller's own may be: a context derived from it cannot join its
// parent's list of children, so the context package starts a goroutine that
// waits for the parent or for the child's cancel. A derived context that is
// never cancelled keeps that goroutine for as long as the parent lives.
type foreignContext struct {
	context.Context
	done chan struct{}
}

func (c foreignContext) Done() <-chan struct{} { return c.done }

func (c foreignContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// TestWatchStopReleasesContext stops watches started under a long-lived
// parent context and checks that no goroutine of theirs remains. A watch
// with TimeoutSeconds once derived two contexts and cancelled only the
// second, leaving the first's goroutine until the parent ended.
func TestWatchStopReleasesContext(t *testing.T) {
	tests := []struct {
		name    string
		timeout *int64
	}{
		{name: "without timeout"},
		{name: "with timeout", timeout: ptr.To[int64](300)},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterCacheServiceServer(gs, admitting{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	lw, err := client.NewListWatch(dial(t, lis.Addr().String()), &corev1.ConfigMap{}, client.Options{Resource: "configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	// A first watch connects, so the connection's own goroutines exist
	// before the snapshot each case compares with.
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := foreignContext{Context: context.Background(), done: make(chan struct{})}
			// The parent outlives the check: its end would release what leaked.
			defer close(parent.done)
			before := goleak.IgnoreCurrent()
			w, err := lw.WatchWithContext(parent, metav1.ListOptions{TimeoutSeconds: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
			if _, open := <-w.ResultChan(); open {
				t.Fatal("the stopped watch's channel is open")
			}
			goleak.VerifyNone(t, before)
		})
	}
}
