package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// fixture runs informerd's caches and CacheService (over an in-memory
// connection) against the real API server, with pods in ns spread over two
// nodes.
type fixture struct {
	client pb.CacheServiceClient
	health healthpb.HealthClient // grpc's health service, registered through Server.Register
	kube   *kubernetes.Clientset
	srv    *server.Server
	set    *pipeline.Set
}

func setup(t *testing.T, ns string) *fixture {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": []string{"web", "db"}[i%2]}},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%2), Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := serve(t, fmt.Sprintf(`
resources:
  - resource: pods
    namespace: %s
    indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]
  - resource: gadgets.v1.example.com
`, ns))
	set := f.set
	pods, _ := set.Lookup("pods")
	testenv.Eventually(t, time.Minute, "the pods cache to hold the 5 pods", func() bool {
		return pods.Cache().Stats().Objects == 5
	})
	return f
}

// serve runs caches for yaml and a CacheService over an in-memory
// connection until the test ends.
func serve(t *testing.T, yaml string, opts ...server.Options) *fixture {
	t.Helper()
	o := server.Options{DefaultPageSize: 2, MaxPageSize: 3, WatchQueueLength: 100}
	if len(opts) > 0 {
		o = opts[0]
	}
	return serveSet(t, runCaches(t, yaml), o)
}

// serveSet serves set's caches with o over an in-memory connection until
// the test ends.
func serveSet(t *testing.T, set *pipeline.Set, o server.Options) *fixture {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := server.New(set, o)
	gs := srv.NewGRPC(server.GRPCOptions{MaxRequestBytes: 4 << 10})
	srv.Register(gs, &healthpb.Health_ServiceDesc, grpchealth.NewServer())
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); gs.Stop() })
	conn := testenv.DialBufconn(t, lis)
	return &fixture{client: pb.NewCacheServiceClient(conn), health: healthpb.NewHealthClient(conn), kube: kubernetes.NewForConfigOrDie(env.Config), srv: srv, set: set}
}

// runCaches runs the caches of the config yaml until the test ends.
func runCaches(t *testing.T, yaml string, opts ...pipeline.Option) *pipeline.Set {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.NewSet(c, env.Config, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, set)
	return set
}

func names(objs []*pb.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func TestCacheService(t *testing.T) {
	const ns = "srv"
	f := setup(t, ns)
	ctx := context.Background()

	t.Run("ListResources", func(t *testing.T) {
		resp, err := f.client.ListResources(ctx, &pb.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range resp.GetResources() {
			got[r.GetName()] = r.GetSynced()
			if r.GetName() == "pods" {
				if r.GetKind() != "Pod" || !r.GetNamespaced() || r.GetObjectCount() != 5 || !cmp.Equal(r.GetIndexes(), []string{"namespace", "node"}) {
					t.Errorf("pods = %v", r)
				}
			}
		}
		if diff := cmp.Diff(map[string]bool{"pods": true, "gadgets.v1.example.com": false}, got); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
	})

	t.Run("Get returns the Kubernetes JSON", func(t *testing.T) {
		resp, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods", Namespace: ns, Name: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := json.Unmarshal(resp.GetObject().GetJson(), &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != "Pod" || p.APIVersion != "v1" || p.Name != "p1" || p.Spec.NodeName != "n1" || len(p.ManagedFields) != 0 {
			t.Errorf("pod = %s/%s %s node %s managedFields %d", p.APIVersion, p.Kind, p.Name, p.Spec.NodeName, len(p.ManagedFields))
		}
		if resp.GetObject().GetResourceVersion() != p.ResourceVersion || resp.GetObject().GetUid() != string(p.UID) {
			t.Errorf("object metadata %v does not match its JSON", resp.GetObject())
		}
	})

	t.Run("List by index, label and namespace", func(t *testing.T) {
		tests := []struct {
			name string
			sel  *pb.Selector
			want []string
		}{
			{"index", &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{"n0"}}}, []string{"p0", "p2", "p4"}},
			{"index and label", &pb.Selector{LabelSelector: "app=web", Index: &pb.IndexSelector{Name: "node", Values: []string{"n0", "n1"}}}, []string{"p0", "p2", "p4"}},
			{"label only", &pb.Selector{LabelSelector: "app in (db)"}, []string{"p1", "p3"}},
			{"other namespace", &pb.Selector{Namespace: "elsewhere"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: tt.sel, Limit: 3})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, names(resp.GetObjects())); diff != "" {
					t.Errorf("List (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("pages come from one snapshot", func(t *testing.T) {
		first, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods"})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(first.GetObjects()); !cmp.Equal(got, []string{"p0", "p1"}) || first.GetContinueToken() == "" {
			t.Fatalf("first page = %v, token %q; want p0 p1 and a token (default page size 2)", got, first.GetContinueToken())
		}
		// Change the cluster between pages: a new pod and a deleted one.
		if _, err := f.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p9"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.kube.CoreV1().Pods(ns).Delete(ctx, "p3", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		// Page on only once the cache has seen the delete, so the snapshot
		// really differs from the current state.
		testenv.Eventually(t, 30*time.Second, "the cache to see p3 deleted", func() bool {
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods", Namespace: ns, Name: "p3"})
			return status.Code(err) == codes.NotFound
		})
		all := names(first.GetObjects())
		token := first.GetContinueToken()
		for token != "" {
			page, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", ContinueToken: token, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if page.GetResourceVersion() != first.GetResourceVersion() {
				t.Errorf("page RV %s, want the first page's %s", page.GetResourceVersion(), first.GetResourceVersion())
			}
			all = append(all, names(page.GetObjects())...)
			token = page.GetContinueToken()
		}
		if diff := cmp.Diff([]string{"p0", "p1", "p2", "p3", "p4"}, all); diff != "" {
			t.Errorf("paged list (-want +got):\n%s", diff)
		}
	})

	t.Run("min_resource_version waits for the cache", func(t *testing.T) {
		p, err := f.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late", Labels: map[string]string{"app": "late"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := f.client.List(wctx, &pb.ListRequest{Resource: "pods", MinResourceVersion: p.ResourceVersion, Selector: &pb.Selector{LabelSelector: "app=late"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(resp.GetObjects()); !cmp.Equal(got, []string{"late"}) {
			t.Errorf("List at >= %s = %v, want [late]", p.ResourceVersion, got)
		}
	})
}

func TestCacheServiceErrors(t *testing.T) {
	const ns = "srv-err"
	f := setup(t, ns)
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	tests := []struct {
		name       string
		call       func() error
		code       codes.Code
		msg        string
		wantReason string
	}{
		{"unknown resource names the served ones", func() error {
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pod", Name: "x"})
			return err
		}, codes.NotFound, "served: pods, gadgets.v1.example.com", pb.ErrorReason_RESOURCE_NOT_SERVED.String()},
		{"missing object", func() error {
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods", Namespace: ns, Name: "nope"})
			return err
		}, codes.NotFound, `"srv-err/nope" not found`, pb.ErrorReason_OBJECT_NOT_FOUND.String()},
		{"missing name", func() error {
			_, err := f.client.Get(ctx, &pb.GetRequest{Resource: "pods"})
			return err
		}, codes.InvalidArgument, "name is required", ""},
		{"resource not synced", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "gadgets.v1.example.com"})
			return err
		}, codes.Unavailable, "has not synced", pb.ErrorReason_CACHE_NOT_SYNCED.String()},
		{"unknown index names the indexes", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "zone", Values: []string{"a"}}}})
			return err
		}, codes.InvalidArgument, "[namespace node]", ""},
		{"bad label selector", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{LabelSelector: "a in ("}})
			return err
		}, codes.InvalidArgument, "label_selector", ""},
		{"bad continue token", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", ContinueToken: "garbage"})
			return err
		}, codes.InvalidArgument, "continue_token", ""},
		{"bad min_resource_version", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", MinResourceVersion: "yesterday"})
			return err
		}, codes.InvalidArgument, "yesterday", ""},
		{"negative limit", func() error {
			_, err := f.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: -1})
			return err
		}, codes.InvalidArgument, "limit", ""},
		{"min_resource_version never reached", func() error {
			_, err := f.client.List(short, &pb.ListRequest{Resource: "pods", MinResourceVersion: "999999999"})
			return err
		}, codes.DeadlineExceeded, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			st, _ := status.FromError(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.msg) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tt.code, tt.msg)
			}
			if tt.wantReason != "" {
				var reason string
				for _, d := range st.Details() {
					if info, ok := d.(*errdetails.ErrorInfo); ok {
						reason = info.GetReason()
					}
				}
				if reason != tt.wantReason {
					t.Errorf("ErrorInfo reason = %q, want %q", reason, tt.wantReason)
				}
			}
		})
	}
}

// TestContinueAheadOfTheCache: a continue token whose snapshot this
// replica's cache has not reached (issued by a replica further along) is
// never served from an older state: it waits, then is UNAVAILABLE /
// RESOURCE_VERSION_AHEAD; once the cache has passed the snapshot, the page
// is the snapshot's.
func TestContinueAheadOfTheCache(t *testing.T) {
	ns := "continue-ahead"
	f := setup(t, ns)
	ctx := context.Background()
	// A write to a resource informerd does not cache: the pods' cache
	// stays behind its resourceVersion.
	s, err := f.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := indexer.Continue{RV: s.ResourceVersion, LastKey: ns + "/p1"}.Encode()
	req := &pb.ListRequest{Resource: "pods", Selector: &pb.Selector{Namespace: ns}, Limit: 2, ContinueToken: tok}
	_, err = f.client.List(ctx, req)
	if st := status.Convert(err); st.Code() != codes.Unavailable || reason(st) != pb.ErrorReason_RESOURCE_VERSION_AHEAD.String() {
		t.Fatalf("continue page ahead of the cache: %v, want UNAVAILABLE / RESOURCE_VERSION_AHEAD", err)
	}
	// A pod created after the snapshot, sorting right after p1: not in it.
	p, err := f.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1a"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.client.List(ctx, req)
	if err != nil {
		t.Fatalf("continue page once the cache has passed the snapshot (a pod at %s): %v", p.ResourceVersion, err)
	}
	if got := names(resp.GetObjects()); !cmp.Equal(got, []string{"p2", "p3"}) || resp.GetResourceVersion() != s.ResourceVersion {
		t.Errorf("continue page = %v at %s, want [p2 p3] at the snapshot's %s", got, resp.GetResourceVersion(), s.ResourceVersion)
	}
}
