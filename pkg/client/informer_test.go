package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
	"github.com/informerd/informerd/pkg/client"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// noLeaks fails the test if goroutines it started outlive it (checked
// after every other cleanup), ignoring those client-go keeps on purpose.
func noLeaks(t *testing.T) {
	ignore := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
}

// fastReconnect keeps grpc's reconnect backoff short, so a test does not
// wait for it after informerd restarts.
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

func dial(t *testing.T, addr string) pb.CacheServiceClient {
	t.Helper()
	conn, err := client.Dial(client.Config{Address: addr}, fastReconnect)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewCacheServiceClient(conn)
}

func namespace(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// versions maps name to resourceVersion.
type versions map[string]string

func apiServerState(t *testing.T, kube kubernetes.Interface, ns string) versions {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := versions{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

func storeState(objs []any) versions {
	out := versions{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			panic(err)
		}
		out[m.GetName()] = m.GetResourceVersion()
	}
	return out
}

// mirror records what an informer's event handlers were told.
type mirror struct {
	mu   sync.Mutex
	objs versions
}

func (m *mirror) set(obj any) {
	a, _ := meta.Accessor(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[a.GetName()] = a.GetResourceVersion()
}

func (m *mirror) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    m.set,
		UpdateFunc: func(_, obj any) { m.set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			a, _ := meta.Accessor(obj)
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.objs, a.GetName())
		},
	}
}

func (m *mirror) state() versions {
	m.mu.Lock()
	defer m.mu.Unlock()
	return versions(cloneMap(m.objs))
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// churn makes n changes to the configmaps of ns: creates, updates and
// deletes in turn.
func churn(t *testing.T, kube kubernetes.Interface, ns, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	cms := kube.CoreV1().ConfigMaps(ns)
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i/3)
		var err error
		switch i % 3 {
		case 0:
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		case 1:
			_, err = cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.UpdateOptions{})
		case 2:
			if i%2 == 0 { // every other object is deleted, the rest stay
				err = cms.Delete(ctx, name, metav1.DeleteOptions{})
			}
		}
		if err != nil {
			t.Errorf("change %d: %v", i, err)
			return
		}
	}
}

// TestInformerMirror runs client-go's own SharedIndexInformer on a
// ListWatch and checks that its store and what its handlers were told are
// an exact copy of the API server's objects (names and resourceVersions)
// after creates, updates and deletes, and after informerd is stopped and
// started again while objects change. Once typed with client-go's default
// streaming list (a Watch with send_initial_events), once unstructured with
// list then watch.
func TestInformerMirror(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	tests := []struct {
		name    string
		example runtime.Object
		opts    client.Options
	}{
		{name: "typed, streaming list", example: &corev1.ConfigMap{}, opts: client.Options{Resource: "configmaps"}},
		{name: "unstructured, list then watch", example: u, opts: client.Options{DisableWatchList: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			ns := fmt.Sprintf("mirror-%d", i)
			kube := kubernetes.NewForConfigOrDie(env.Config)
			namespace(t, kube, ns)
			churn(t, kube, ns, "before", 9)
			srv := testserver.Start(t, env.Config, fmt.Sprintf("resources: [{resource: configmaps, namespace: %s}]", ns), testserver.Options{})
			lw, err := client.NewListWatch(dial(t, srv.Addr), tt.example, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			inf := cache.NewSharedIndexInformer(lw, tt.example, 0, cache.Indexers{})
			m := &mirror{objs: versions{}}
			if _, err := inf.AddEventHandler(m.handler()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { inf.RunWithContext(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			sctx, scancel := context.WithTimeout(ctx, time.Minute)
			defer scancel()
			if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync through informerd within a minute")
			}

			check := func(when string) {
				t.Helper()
				var want versions
				ok := testenv.Poll(time.Minute, func() bool {
					want = apiServerState(t, kube, ns)
					return cmp.Equal(want, storeState(inf.GetStore().List())) && cmp.Equal(want, m.state())
				})
				if !ok {
					t.Fatalf("%s: the informer is not a mirror of the API server after a minute\nstore (-apiserver +store):\n%s\nhandlers (-apiserver +handlers):\n%s",
						when, cmp.Diff(want, storeState(inf.GetStore().List())), cmp.Diff(want, m.state()))
				}
			}
			check("after sync")
			churn(t, kube, ns, "live", 12)
			check("after changes")

			// Restart informerd while objects change: some changes happen
			// while it is down, some while the new one lists.
			var changes sync.WaitGroup
			changes.Go(func() { churn(t, kube, ns, "restart", 30) })
			srv.Stop()
			churn(t, kube, ns, "down", 6)
			srv.StartAgain()
			changes.Wait()
			churn(t, kube, ns, "after", 6)
			check("after the restart")

			// The objects came through informerd: it strips managedFields.
			for _, o := range inf.GetStore().List() {
				if a, _ := meta.Accessor(o); len(a.GetManagedFields()) > 0 {
					t.Fatalf("%s has managedFields: not from informerd", a.GetName())
				}
			}
		})
	}
}
