package upstream_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/upstream"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serve serves set's caches over an in-memory connection until the test
// ends, and returns a client of it.
func serve(t *testing.T, set *pipeline.Set) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := server.New(set, server.Options{WatchQueueLength: 1000})
	gs := srv.NewGRPC(server.GRPCOptions{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); gs.Stop() })
	conn := testenv.DialBufconn(t, lis)
	return conn
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tiers is a root informerd over the API server and two leaves over it,
// each taking another part of the pods of ns.
type tiers struct {
	kube         *kubernetes.Clientset
	root         pb.CacheServiceClient
	leafA, leafB pb.CacheServiceClient
	ns           string
}

const rootConfig = `
resources:
  - resource: pods
    namespace: %s
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
      - {name: zone, label: zone}
`

// leafConfig takes the pods with value in the root's index.
const leafConfig = `
resources:
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
    upstreamSelector:
      index: {name: %s, values: ["%s"]}
`

func startTiers(t *testing.T, ns string) *tiers {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root, err := pipeline.NewSet(parse(t, fmt.Sprintf(rootConfig, ns)), env.Config, quiet())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, root)
	rootConn := serve(t, root)
	leaf := func(index, value string) pb.CacheServiceClient {
		set, err := pipeline.NewSetFrom(parse(t, fmt.Sprintf(leafConfig, index, value)), upstream.New(rootConn, "the root"), quiet())
		if err != nil {
			t.Fatal(err)
		}
		testenv.Run(t, set)
		return pb.NewCacheServiceClient(serve(t, set))
	}
	return &tiers{kube: kube, root: pb.NewCacheServiceClient(rootConn), leafA: leaf("node", "n0"), leafB: leaf("zone", "z1"), ns: ns}
}

func (f *tiers) createPod(t *testing.T, name, node, zone string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	if _, err := f.kube.CoreV1().Pods(f.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *tiers) patch(t *testing.T, name, patch string) string {
	t.Helper()
	p, err := f.kube.CoreV1().Pods(f.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.ResourceVersion
}

// list returns every object c lists with sel, as "name rv json", sorted,
// and the list's resourceVersion.
func list(t *testing.T, c pb.CacheServiceClient, sel *pb.Selector) ([]string, string) {
	t.Helper()
	out, rv, err := tryList(c, sel)
	if err != nil {
		t.Fatal(err)
	}
	return out, rv
}

func tryList(c pb.CacheServiceClient, sel *pb.Selector) ([]string, string, error) {
	var out []string
	var rv string
	for tok := ""; ; {
		resp, err := c.List(context.Background(), &pb.ListRequest{Resource: "pods", Selector: sel, ContinueToken: tok})
		if err != nil {
			return nil, "", err
		}
		rv = resp.GetResourceVersion()
		for _, o := range resp.GetObjects() {
			out = append(out, o.GetName()+" "+o.GetResourceVersion()+" "+string(o.GetJson()))
		}
		if tok = resp.GetContinueToken(); tok == "" {
			break
		}
	}
	sort.Strings(out)
	return out, rv, nil
}

// events collects a watch's events as "TYPE name rv", bookmarks left out.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func watchFrom(ctx context.Context, t *testing.T, c pb.CacheServiceClient, sel *pb.Selector, rv string) *events {
	t.Helper()
	ws, err := c.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: sel, ResourceVersion: rv, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Header(); err != nil {
		t.Fatalf("watch from %s: %v", rv, err)
	}
	e := &events{}
	go func() {
		for {
			ev, err := ws.Recv()
			if err != nil {
				return
			}
			if ev.GetType() == pb.EventType_EVENT_TYPE_BOOKMARK {
				continue
			}
			e.mu.Lock()
			e.got = append(e.got, ev.GetType().String()[len("EVENT_TYPE_"):]+" "+ev.GetObject().GetName()+" "+ev.GetResourceVersion())
			e.mu.Unlock()
		}
	}()
	return e
}

// TestTiers: each leaf's List and watch equal the root's for its part, with
// the same resourceVersions and bytes; a change outside a leaf's part never
// reaches it; an object leaving a leaf's part is a DELETED there.
func TestTiers(t *testing.T) {
	f := startTiers(t, "tiers")
	for i := range 6 {
		f.createPod(t, fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i%3), fmt.Sprintf("z%d", i%2))
	}
	partA := &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{"n0"}}}
	partB := &pb.Selector{Index: &pb.IndexSelector{Name: "zone", Values: []string{"z1"}}}
	testenv.Eventually(t, time.Minute, "the root to hold the 6 pods", func() bool {
		all, _, err := tryList(f.root, nil)
		return err == nil && len(all) == 6
	})
	leaves := map[string]struct {
		c   pb.CacheServiceClient
		sel *pb.Selector
	}{"leaf A (node n0)": {f.leafA, partA}, "leaf B (zone z1)": {f.leafB, partB}}
	// holdsItsPart waits until each leaf lists exactly the root's part.
	holdsItsPart := func(when string) {
		t.Helper()
		for name, leaf := range leaves {
			want, _ := list(t, f.root, leaf.sel)
			testenv.Eventually(t, time.Minute, name+" to hold its part "+when, func() bool {
				got, _, err := tryList(leaf.c, nil)
				return err == nil && cmp.Equal(want, got)
			})
		}
	}
	holdsItsPart("at first")
	for name, leaf := range leaves {
		if want, _ := list(t, f.root, leaf.sel); len(want) != 2 && len(want) != 3 {
			t.Fatalf("%s: the root's part has %d pods: %v", name, len(want), want)
		}
	}

	// Watch each leaf and the root's same part from one resourceVersion
	// both hold, then change pods in and out of the parts.
	_, leafARV := list(t, f.leafA, nil)
	_, leafBRV := list(t, f.leafB, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leafA, rootA := watchFrom(ctx, t, f.leafA, nil, leafARV), watchFrom(ctx, t, f.root, partA, leafARV)
	leafB, rootB := watchFrom(ctx, t, f.leafB, nil, leafBRV), watchFrom(ctx, t, f.root, partB, leafBRV)
	f.patch(t, "p0", `{"metadata":{"annotations":{"a":"1"}}}`) // n0, z0: A
	f.patch(t, "p1", `{"metadata":{"annotations":{"a":"1"}}}`) // n1, z1: B
	f.patch(t, "p2", `{"metadata":{"annotations":{"a":"1"}}}`) // n2, z0: neither
	f.patch(t, "p3", `{"metadata":{"labels":{"zone":"z0"}}}`)  // n0, z1 → z0: A's change, leaves B
	f.patch(t, "p4", `{"metadata":{"labels":{"zone":"z1"}}}`)  // n1, z0 → z1: enters B
	if err := f.kube.CoreV1().Pods(f.ns).Delete(context.Background(), "p0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	f.createPod(t, "p6", "n0", "z1") // both
	// What the root's parts carry is what each leaf must.
	for _, c := range []struct {
		name       string
		leaf, root *events
		want       int
	}{{"leaf A", leafA, rootA, 4}, {"leaf B", leafB, rootB, 4}} {
		testenv.Eventually(t, time.Minute, c.name+"'s part to carry its changes at the root", func() bool { return len(c.root.lines()) >= c.want })
		testenv.Eventually(t, time.Minute, c.name+" to carry them", func() bool { return len(c.leaf.lines()) >= len(c.root.lines()) })
		if diff := cmp.Diff(c.root.lines(), c.leaf.lines()); diff != "" {
			t.Errorf("%s's watch (-root's part +leaf):\n%s", c.name, diff)
		}
	}
	if got := leafB.lines(); !slices.ContainsFunc(got, func(l string) bool { return len(l) > 10 && l[:10] == "DELETED p3" }) {
		t.Errorf("leaf B: p3 left its zone, want a DELETED: %v", got)
	}
	// Nothing of p2 (in neither part) reached either leaf, and each
	// leaf's cache holds its part: the root's objects, resourceVersions
	// and bytes.
	for name, l := range map[string]*events{"leaf A": leafA, "leaf B": leafB} {
		for _, line := range l.lines() {
			if fieldName(line) == "p2" {
				t.Errorf("%s got %q, outside its part", name, line)
			}
		}
	}
	holdsItsPart("after the changes")
}

// fieldName is the object name in a "TYPE name rv" line.
func fieldName(line string) string {
	var typ, name, rv string
	_, _ = fmt.Sscan(line, &typ, &name, &rv)
	return name
}

// TestCheck is what --validate-config says of a leaf's configuration
// against its upstream.
func TestCheck(t *testing.T) {
	root, err := pipeline.NewSet(parse(t, fmt.Sprintf(rootConfig, "tiers-check")), env.Config, quiet())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, root)
	src := upstream.New(serve(t, root), "the root")
	ctx := context.Background()
	testenv.Eventually(t, time.Minute, "the root to sync", func() bool {
		return len(src.Check(ctx, parse(t, fmt.Sprintf(leafConfig, "node", "n0")).Resources[0])) == 0
	})
	for _, tt := range []struct{ yaml, want string }{
		{fmt.Sprintf(leafConfig, "nodes", "n0"), `upstreamSelector.index "nodes": the upstream has no such index for pods (its indexes: namespace, node, zone)`},
		{"resources:\n  - resource: secrets\n", `does not serve "secrets" (it serves pods)`},
	} {
		problems := src.Check(ctx, parse(t, tt.yaml).Resources[0])
		if len(problems) != 1 || !strings.Contains(problems[0], tt.want) {
			t.Errorf("Check(%s) = %q, want a problem saying %q", tt.yaml, problems, tt.want)
		}
	}
}
