package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// event is what a client-go informer handler saw, reduced to what the test
// controls.
type event struct {
	Type  string
	Name  string
	Value string
}

// recorder collects informer events; handlers run on the informer's goroutine
// while the test reads, so it locks.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(typ string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm := obj.(*corev1.ConfigMap)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{Type: typ, Name: cm.Name, Value: cm.Data["v"]})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// TestInformerSeesChangesThroughRealAPIServer proves the harness: a client-go
// informer on the real kube-apiserver sees creates, updates and deletes.
func TestInformerSeesChangesThroughRealAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "testenv-informer"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns.Name))
	inf := factory.Core().V1().ConfigMaps().Informer()
	rec := &recorder{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.add("ADDED", obj) },
		UpdateFunc: func(_, obj any) { rec.add("MODIFIED", obj) },
		DeleteFunc: func(obj any) { rec.add("DELETED", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	const n = 20
	var want []event
	cms := client.CoreV1().ConfigMaps(ns.Name)
	for i := range n {
		name := fmt.Sprintf("cm-%02d", i)
		if _, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string]string{"v": "1"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, event{"ADDED", name, "1"})
	}
	for i := range n {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "2"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, event{"MODIFIED", name, "2"})
	}
	for i := range n {
		name := fmt.Sprintf("cm-%02d", i)
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, event{"DELETED", name, "2"})
	}

	// One writer, one watch: the informer sees the writes in the order made.
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(rec.snapshot()) >= len(want), nil
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, rec.snapshot()); diff != "" {
		t.Errorf("informer events (-want +got):\n%s", diff)
	}
	if got := len(inf.GetStore().List()); got != 0 {
		t.Errorf("informer store holds %d objects after every delete, want 0", got)
	}
}

func TestBinaryDirNamesTheFix(t *testing.T) {
	t.Setenv(testenv.DirEnv, t.TempDir())
	_, err := testenv.BinaryDir()
	if !errors.Is(err, testenv.ErrBinariesMissing) {
		t.Fatalf("BinaryDir() error = %v, want ErrBinariesMissing", err)
	}
	if want := "make testenv"; !strings.Contains(err.Error(), want) {
		t.Errorf("BinaryDir() error %q does not tell the user to run %q", err, want)
	}
}
