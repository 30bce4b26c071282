package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apisharding "k8s.io/apiserver/pkg/sharding"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

// TestShardSelector lists and watches pods by shard_selector over gRPC:
// two halves of the uid hash, alone and with an index, together are the
// unsharded answer, each what apimachinery's selector keeps; a bad
// selector is INVALID_ARGUMENT.
func TestShardSelector(t *testing.T) {
	const ns = "srv-shard"
	f := setup(t, ns)
	ctx := context.Background()
	halves := []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
	}
	pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, index := range []*pb.IndexSelector{nil, {Name: "node", Values: []string{"n0", "n1"}}} {
		var union []string
		for _, h := range halves {
			sel, err := apisharding.Parse(h)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range pods.Items {
				if ok, _ := sel.Matches(&p); ok {
					want = append(want, p.Name)
				}
			}
			var got []string
			tok := ""
			for {
				resp, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{Namespace: ns, Index: index, ShardSelector: h}, ContinueToken: tok})
				if err != nil {
					t.Fatalf("List %s: %v", h, err)
				}
				got = append(got, names(resp.GetObjects())...)
				if tok = resp.GetContinueToken(); tok == "" {
					break
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("index %v, shard %s: %v, apimachinery's selector keeps %v", index, h, got, want)
			}
			union = append(union, got...)
		}
		slices.Sort(union)
		if len(union) != len(pods.Items) || len(slices.Compact(slices.Clone(union))) != len(union) {
			t.Fatalf("index %v: the halves hold %v, the namespace %d pods", index, union, len(pods.Items))
		}
	}

	_, err = f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{ShardSelector: "shardRange(object.metadata.name, '0x0', '0x8')"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad shard selector: %v, want INVALID_ARGUMENT", err)
	}

	// Watches: each change in exactly one half's stream.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan string, 100)
	for _, h := range halves {
		stream, err := f.client.Watch(wctx, &pb.WatchRequest{Resource: "pods", Selector: &pb.Selector{Namespace: ns, ShardSelector: h}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Header(); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				ev, err := stream.Recv()
				if err != nil {
					return
				}
				events <- fmt.Sprintf("%s %s %s", ev.GetType(), ev.GetObject().GetName(), ev.GetObject().GetResourceVersion())
			}
		}()
	}
	want := map[string]bool{}
	for i := range 5 {
		p, err := f.kube.CoreV1().Pods(ns).Patch(ctx, fmt.Sprintf("p%d", i), types.MergePatchType, []byte(`{"metadata":{"labels":{"shard":"seen"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%s %s %s", pb.EventType_EVENT_TYPE_MODIFIED, p.Name, p.ResourceVersion)] = true
	}
	got := map[string]int{}
	for range want {
		got[testenv.Receive(t, time.Minute, "a half's watch event", events)]++
	}
	select {
	case ev := <-events:
		t.Fatalf("an extra event: %s", ev)
	case <-time.After(500 * time.Millisecond):
	}
	for ev := range want {
		if got[ev] != 1 {
			t.Fatalf("%s reached %d halves' streams, want 1 (got %v)", ev, got[ev], got)
		}
	}
}
