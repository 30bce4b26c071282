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
	"github.com/informerd/informerd/internal/server"
)

// TestLimits: the Watch stream limit answers RESOURCE_EXHAUSTED naming the
// flag, and List pages stop at MaxPageBytes with a continue token.
func TestLimits(t *testing.T) {
	const ns = "limits"
	f := serve(t, ownerConfig(ns), server.Options{MaxWatches: 1, MaxPageBytes: 2500})
	createNS(t, f, ns)
	for i := range 4 {
		if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": strings.Repeat("x", 1000)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitSyncedVia(t, f, "configmaps")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := openWatch(ctx, t, f, &pb.WatchRequest{Resource: "configmaps", SendInitialEvents: true})
	waitLen(t, first, 1)
	second := openWatch(ctx, t, f, &pb.WatchRequest{Resource: "configmaps"})
	<-second.done
	if st := status.Convert(second.err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watches") {
		t.Errorf("second watch ended with %v %q, want RESOURCE_EXHAUSTED naming --max-watches", st.Code(), st.Message())
	}

	var pages [][]string
	token := ""
	for {
		resp, err := f.client.List(ctx, &pb.ListRequest{Resource: "configmaps", Limit: 100, ContinueToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, names(resp.GetObjects()))
		if token = resp.GetContinueToken(); token == "" {
			break
		}
	}
	// Each ~1.1 KB object: two fit under 2,500 bytes, a third does not.
	if len(pages) != 2 || len(pages[0]) != 2 || len(pages[1]) != 2 {
		t.Errorf("pages = %v, want two pages of two", pages)
	}
}
