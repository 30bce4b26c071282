package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/schema"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// apiSchemas checks masks against the test API server's schemas.
type apiSchemas struct{ src *schema.Source }

func (s apiSchemas) Check(ctx context.Context, r pipeline.Resolved, paths [][]string) error {
	sch, err := s.src.For(ctx, r.GVR.GroupVersion().WithKind(r.Kind))
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := sch.Check(p); err != nil {
			return err
		}
	}
	return nil
}

func fieldsFixture(t *testing.T, ns string) *fixture {
	f := setup(t, ns)
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	o := server.Options{DefaultPageSize: 2, MaxPageSize: 3, WatchQueueLength: 100, Schemas: apiSchemas{schema.NewSource(dc.OpenAPIV3())}}
	// The same caches, served again with the schemas.
	g := serveSet(t, f.set, o)
	g.kube = f.kube
	return g
}

func fields(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// decodeJSON decodes an object's JSON for comparing.
func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// TestFieldMasks: Get, List and Watch return objects as the mask shows
// them; a watch is sent no change its mask hides, and resuming after one
// misses nothing.
func TestFieldMasks(t *testing.T) {
	const ns = "fields"
	f := fieldsFixture(t, ns)
	ctx := context.Background()
	mask := fields("metadata.labels", "spec.nodeName", "spec.containers.image")
	shows := func(t *testing.T, o *pb.Object) {
		t.Helper()
		got := decodeJSON(t, o.GetJson())
		meta := got["metadata"].(map[string]any)
		want := map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": o.GetName(), "namespace": ns, "uid": o.GetUid(), "resourceVersion": o.GetResourceVersion(), "labels": meta["labels"]},
			"spec":     map[string]any{"nodeName": got["spec"].(map[string]any)["nodeName"], "containers": []any{map[string]any{"image": "img"}}},
		}
		if meta["labels"] == nil {
			t.Errorf("%s: no labels", o.GetName())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s as the mask shows it (-want +got):\n%s", o.GetName(), diff)
		}
	}

	get, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods", Namespace: ns, Name: "p0", Fields: mask})
	if err != nil {
		t.Fatal(err)
	}
	shows(t, get.GetObject())
	var listed []string
	for tok := ""; ; {
		page, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{Namespace: ns}, Fields: mask, ContinueToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.GetObjects() {
			shows(t, o)
			listed = append(listed, o.GetName())
		}
		if tok = page.GetContinueToken(); tok == "" {
			break
		}
	}
	if len(listed) != 5 {
		t.Errorf("listed %v through the mask, want the 5 pods", listed)
	}

	// Two watchers of node n0's pods: one masked, one whole.
	sel := &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{"n0"}}}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	masked := openWatch(wctx, t, f, &pb.WatchRequest{Resource: "pods", Selector: sel, Fields: mask, AllowBookmarks: true})
	whole := openWatch(wctx, t, f, &pb.WatchRequest{Resource: "pods", Selector: sel})
	patch := func(name, p string) string {
		t.Helper()
		pod, err := f.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod.ResourceVersion
	}
	hidden := patch("p0", `{"metadata":{"annotations":{"heartbeat":"1"}}}`)
	shown := patch("p0", `{"metadata":{"labels":{"app":"api"}}}`)
	testenv.Eventually(t, 30*time.Second, "the whole-object watch to see both changes", func() bool { return len(whole.lines()) == 2 })
	want := []string{"MODIFIED p0 " + shown}
	testenv.Eventually(t, 30*time.Second, "the masked watch to see the label change", func() bool { return len(masked.lines()) >= 1 })
	if diff := cmp.Diff(want, masked.lines()); diff != "" {
		t.Errorf("masked watch (-want +got):\n%s", diff)
	}
	// A client that stopped at the hidden change (a bookmark carries it
	// there) resumes from it and misses nothing.
	resumed := openWatch(wctx, t, f, &pb.WatchRequest{Resource: "pods", Selector: sel, Fields: mask, ResourceVersion: hidden})
	testenv.Eventually(t, 30*time.Second, "the resumed watch to see the label change", func() bool { return len(resumed.lines()) >= 1 })
	if diff := cmp.Diff(want, resumed.lines()); diff != "" {
		t.Errorf("resumed watch (-want +got):\n%s", diff)
	}
}

func TestFieldMaskErrors(t *testing.T) {
	f := fieldsFixture(t, "fields-errors")
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"malformed", []string{"metadata..labels"}, "empty field name"},
		{"not in the schema", []string{"status.podIPz"}, `did you mean podIP`},
		{"below a leaf", []string{"metadata.creationTimestamp.x"}, "has no fields"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check := func(call string, err error) {
				t.Helper()
				if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.want) {
					t.Errorf("%s with fields %q: %v, want INVALID_ARGUMENT saying %q", call, tt.paths, err, tt.want)
				}
			}
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods", Namespace: "fields-errors", Name: "p0", Fields: fields(tt.paths...)})
			check("Get", err)
			_, err = f.client.List(ctx, &pb.ListRequest{Resource: "pods", Fields: fields(tt.paths...)})
			check("List", err)
			ws, err := f.client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Fields: fields(tt.paths...)})
			if err == nil {
				_, err = ws.Recv()
			}
			check("Watch", err)
		})
	}
}

// TestTooManyFieldMasks: past --max-projections distinct masks on a
// resource, a watch with another is refused with RESOURCE_EXHAUSTED naming
// the limit; one with a mask in use, or none, is not.
func TestTooManyFieldMasks(t *testing.T) {
	set := runCaches(t, `
resources:
  - resource: configmaps
    namespace: fields-limit
`, pipeline.WithMaxProjections(1))
	f := serveSet(t, set, server.Options{DefaultPageSize: 2, MaxPageSize: 3, WatchQueueLength: 100})
	waitSyncedVia(t, f, "configmaps")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each watch is admitted (its headers arrive) before the next is
	// opened, so that they take the masks in this order.
	first := openAdmitted(ctx, t, f, &pb.WatchRequest{Resource: "configmaps", Fields: fields("data")})
	same := openAdmitted(ctx, t, f, &pb.WatchRequest{Resource: "configmaps", Fields: fields("data")})
	none := openAdmitted(ctx, t, f, &pb.WatchRequest{Resource: "configmaps"})
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	ws, err := f.client.Watch(rctx, &pb.WatchRequest{Resource: "configmaps", Fields: fields("metadata.labels")})
	if err == nil {
		_, err = ws.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-projections") {
		t.Errorf("a second distinct mask: %v, want RESOURCE_EXHAUSTED naming --max-projections", err)
	}
	for name, s := range map[string]*stream{"first": first, "same mask": same, "no mask": none} {
		select {
		case <-s.done:
			t.Errorf("the %s watch ended: %v", name, s.err)
		default:
		}
	}
}

// openAdmitted opens a watch and waits until informerd has admitted it.
func openAdmitted(ctx context.Context, t *testing.T, f *fixture, req *pb.WatchRequest) *stream {
	t.Helper()
	ws, err := f.client.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Header(); err != nil {
		t.Fatalf("watch %v not admitted: %v", req, err)
	}
	return collect(ws)
}
