package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// TestStalledClient: a watcher that stops reading does not hold back a fast
// one; when it reads again after the history window moved past it, it is
// ended with RESOURCE_EXHAUSTED and where to resume. A coalescing watcher
// stalled the same way is never ended and ends up with the latest state.
func TestStalledClient(t *testing.T) {
	const ns = "watch-slow"
	f := serve(t, fmt.Sprintf(`
resources:
  - resource: configmaps
    namespace: %s
history:
  maxEvents: 50
`, ns))
	createNS(t, f, ns)
	rv := waitSyncedVia(t, f, "configmaps")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Opened, but nobody calls Recv until the end.
	stalled, err := f.client.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	coalescing, err := f.client.Watch(ctx, &pb.WatchRequest{Resource: "configmaps", ResourceVersion: rv,
		SlowConsumerPolicy: pb.SlowConsumerPolicy_SLOW_CONSUMER_POLICY_COALESCE})
	if err != nil {
		t.Fatal(err)
	}
	fast := openWatch(ctx, t, f, &pb.WatchRequest{Resource: "configmaps", ResourceVersion: rv})

	// 300 events of 16 KiB: more than the stalled streams' queues (100),
	// the transport's buffers and the history (50) can hold.
	const n = 150
	big := strings.Repeat("x", 16<<10)
	api := f.kube.CoreV1().ConfigMaps(ns)
	for i := range n {
		if _, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"v": big}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := api.Delete(ctx, fmt.Sprintf("cm-%03d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "zz-end"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLen(t, fast, 2*n+1)

	var received int
	for {
		_, err := stalled.Recv()
		if err == nil {
			received++
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || reason(st) != pb.ErrorReason_SLOW_CONSUMER.String() {
			t.Fatalf("stalled watcher ended with %v %q, want RESOURCE_EXHAUSTED %s", st.Code(), st.Message(), pb.ErrorReason_SLOW_CONSUMER)
		}
		if received >= 2*n {
			t.Errorf("stalled watcher got all %d events before being ended; the test did not stall it", received)
		}
		break
	}

	// The coalescing watcher: whatever it got, applied in order, must leave
	// only the last object (every other one was created and deleted). An
	// object added and deleted while it was stalled it never hears of.
	state := map[string]bool{}
	seen := 0
	for {
		ev, err := coalescing.Recv()
		if err != nil {
			t.Fatalf("coalescing watcher ended: %v", err)
		}
		seen++
		switch ev.GetType() {
		case pb.EventType_EVENT_TYPE_ADDED, pb.EventType_EVENT_TYPE_MODIFIED:
			state[ev.GetObject().GetName()] = true
		case pb.EventType_EVENT_TYPE_DELETED:
			delete(state, ev.GetObject().GetName())
		}
		if ev.GetObject().GetName() == "zz-end" {
			break
		}
	}
	if len(state) != 1 {
		t.Errorf("coalescing watcher's view holds %d objects, want only zz-end", len(state))
	}
	t.Logf("stalled watcher got %d of %d events before RESOURCE_EXHAUSTED; coalescing watcher got %d", received, 2*n, seen)
}
