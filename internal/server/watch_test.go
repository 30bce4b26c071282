package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// ownerConfig caches configmaps of ns with an index on .data.owner, which
// the tests change to move objects between index values.
func ownerConfig(ns string) string {
	return fmt.Sprintf(`
resources:
  - resource: configmaps
    namespace: %s
    indexes: [{name: owner, jsonpath: "{.data.owner}"}]
`, ns)
}

func waitSyncedVia(t *testing.T, f *fixture, resource string) string {
	t.Helper()
	var rv string
	testenv.Eventually(t, time.Minute, resource+" to sync", func() bool {
		resp, err := f.client.List(context.Background(), &pb.ListRequest{Resource: resource})
		rv = resp.GetResourceVersion()
		return err == nil
	})
	return rv
}

// stream collects one watch's events as "TYPE name rv" lines.
type stream struct {
	mu     sync.Mutex
	events []string
	err    error
	done   chan struct{}
}

func (s *stream) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

func openWatch(ctx context.Context, t *testing.T, f *fixture, req *pb.WatchRequest) *stream {
	t.Helper()
	ws, err := f.client.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return collect(ws)
}

// collect reads ws's events into a stream until it ends.
func collect(ws pb.CacheService_WatchClient) *stream {
	s := &stream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			ev, err := ws.Recv()
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			line := ev.GetType().String()[len("EVENT_TYPE_"):]
			if o := ev.GetObject(); o != nil {
				line += " " + o.GetName()
			}
			s.mu.Lock()
			s.events = append(s.events, line+" "+ev.GetResourceVersion())
			s.mu.Unlock()
		}
	}()
	return s
}

// cmOps applies changes to configmaps and records, per owner value, the
// events a watcher of that value must see.
type cmOps struct {
	t      *testing.T
	f      *fixture
	ns     string
	owner  map[string]string
	expect map[string][]string
}

func (o *cmOps) record(owner, line string) { o.expect[owner] = append(o.expect[owner], line) }

func (o *cmOps) create(name, owner string) {
	cm, err := o.f.kube.CoreV1().ConfigMaps(o.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"owner": owner},
	}, metav1.CreateOptions{})
	if err != nil {
		o.t.Fatal(err)
	}
	o.owner[name] = owner
	o.record(owner, "ADDED "+name+" "+cm.ResourceVersion)
}

func (o *cmOps) update(name, owner, extra string) {
	api := o.f.kube.CoreV1().ConfigMaps(o.ns)
	cm, err := api.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		o.t.Fatal(err)
	}
	cm.Data = map[string]string{"owner": owner, "extra": extra}
	cm, err = api.Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		o.t.Fatal(err)
	}
	old := o.owner[name]
	o.owner[name] = owner
	if old == owner {
		o.record(owner, "MODIFIED "+name+" "+cm.ResourceVersion)
		return
	}
	o.record(old, "DELETED "+name+" "+cm.ResourceVersion)
	o.record(owner, "ADDED "+name+" "+cm.ResourceVersion)
}

func (o *cmOps) delete(name string) {
	// The delete's RV is not returned; the test checks its type and name.
	if err := o.f.kube.CoreV1().ConfigMaps(o.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		o.t.Fatal(err)
	}
	o.record(o.owner[name], "DELETED "+name+" ?")
	delete(o.owner, name)
}

// matches compares event lines, where an expected RV of "?" matches any.
func matches(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] == got[i] {
			continue
		}
		if len(want[i]) > 2 && want[i][len(want[i])-1] == '?' {
			prefix := want[i][:len(want[i])-1]
			if len(got[i]) > len(prefix) && got[i][:len(prefix)] == prefix {
				continue
			}
		}
		return false
	}
	return true
}

func createNS(t *testing.T, f *fixture, ns string) {
	t.Helper()
	if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWatchByIndexManyWatchers runs 200 watchers split over 10 index values
// (half starting with initial events, half from a List's resourceVersion)
// while objects are created, moved between values, changed and deleted:
// each watcher must see exactly its value's events, in order.
func TestWatchByIndexManyWatchers(t *testing.T) {
	const ns = "watch-many"
	f := serve(t, ownerConfig(ns))
	createNS(t, f, ns)
	listRV := waitSyncedVia(t, f, "configmaps")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type watcher struct {
		owner   string
		initial bool
		s       *stream
	}
	var watchers []watcher
	for i := range 200 {
		owner := fmt.Sprintf("o%d", i%10)
		req := &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "owner", Values: []string{owner}}}}
		initial := i%2 == 0
		if initial {
			req.SendInitialEvents = true
		} else {
			req.ResourceVersion = listRV
		}
		watchers = append(watchers, watcher{owner, initial, openWatch(ctx, t, f, req)})
	}

	// Initial-events watchers have joined once their INITIAL_EVENTS_END is in.
	for _, w := range watchers {
		if w.initial {
			waitLen(t, w.s, 1)
		}
	}
	ops := &cmOps{t: t, f: f, ns: ns, owner: map[string]string{}, expect: map[string][]string{}}
	for i := range 30 {
		ops.create(fmt.Sprintf("cm-%02d", i), fmt.Sprintf("o%d", i%10))
	}
	for i := range 15 {
		ops.update(fmt.Sprintf("cm-%02d", i), fmt.Sprintf("o%d", (i+1)%10), "moved")
	}
	for i := 15; i < 25; i++ {
		ops.update(fmt.Sprintf("cm-%02d", i), fmt.Sprintf("o%d", i%10), "changed")
	}
	for i := 20; i < 30; i++ {
		ops.delete(fmt.Sprintf("cm-%02d", i))
	}

	for i, w := range watchers {
		want := ops.expect[w.owner]
		if w.initial {
			want = append([]string{"INITIAL_EVENTS_END ?"}, want...)
		}
		testenv.Poll(30*time.Second, func() bool { return len(w.s.lines()) >= len(want) })
		if got := w.s.lines(); !matches(want, got) {
			t.Errorf("watcher %d (owner %s, initial %v):\n%s", i, w.owner, w.initial, cmp.Diff(want, got))
			if i > 5 {
				t.FailNow()
			}
		}
	}
}

// TestWatchResumeAndTooOld disconnects a watcher, changes objects, and
// resumes it from the last resourceVersion it got: it must see exactly the
// changes it missed. A resourceVersion before the history window is refused
// with OUT_OF_RANGE and RESOURCE_VERSION_TOO_OLD.
func TestWatchResumeAndTooOld(t *testing.T) {
	const ns = "watch-resume"
	f := serve(t, ownerConfig(ns))
	createNS(t, f, ns)
	listRV := waitSyncedVia(t, f, "configmaps")
	ops := &cmOps{t: t, f: f, ns: ns, owner: map[string]string{}, expect: map[string][]string{}}
	sel := &pb.Selector{Index: &pb.IndexSelector{Name: "owner", Values: []string{"a"}}}

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := openWatch(ctx1, t, f, &pb.WatchRequest{Resource: "configmaps", Selector: sel, ResourceVersion: listRV})
	ops.create("x", "a")
	ops.create("y", "a")
	waitLen(t, first, 2)
	cancel1()
	<-first.done
	got := first.lines()
	last := strings.Fields(got[len(got)-1])
	lastRV := last[len(last)-1]

	ops.update("x", "b", "")
	ops.update("y", "a", "1")
	ops.create("z", "a")
	second := openWatch(context.Background(), t, f, &pb.WatchRequest{Resource: "configmaps", Selector: sel, ResourceVersion: lastRV})
	want := ops.expect["a"][2:]
	waitLen(t, second, len(want))
	if diff := cmp.Diff(want, second.lines()); diff != "" {
		t.Errorf("resumed from %s (-want +got):\n%s", lastRV, diff)
	}

	tooOld := openWatch(context.Background(), t, f, &pb.WatchRequest{Resource: "configmaps", ResourceVersion: "1"})
	<-tooOld.done
	st := status.Convert(tooOld.err)
	if st.Code() != codes.OutOfRange || reason(st) != pb.ErrorReason_RESOURCE_VERSION_TOO_OLD.String() {
		t.Errorf("watch from RV 1 ended with %v %q (reason %q), want OUT_OF_RANGE %s", st.Code(), st.Message(), reason(st), pb.ErrorReason_RESOURCE_VERSION_TOO_OLD)
	}
}

// TestWatchEndsOnShutdown: stopping the server ends every stream with
// UNAVAILABLE, SHUTTING_DOWN and the resourceVersion to resume from.
func TestWatchEndsOnShutdown(t *testing.T) {
	const ns = "watch-stop"
	obs := &observer{}
	f := serve(t, ownerConfig(ns), server.Options{Observer: obs})
	createNS(t, f, ns)
	waitSyncedVia(t, f, "configmaps")
	s := openWatch(context.Background(), t, f, &pb.WatchRequest{Resource: "configmaps", SendInitialEvents: true})
	waitLen(t, s, 1)
	if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLen(t, s, 2)
	f.srv.Stop()
	<-s.done
	st := status.Convert(s.err)
	if st.Code() != codes.Unavailable || reason(st) != pb.ErrorReason_SHUTTING_DOWN.String() {
		t.Errorf("stream ended with %v %q, want UNAVAILABLE %s", st.Code(), st.Message(), pb.ErrorReason_SHUTTING_DOWN)
	}
	testenv.Eventually(t, 30*time.Second, "the stream's end to be counted", func() bool { return obs.get().ended["configmaps/shutdown"] == 1 })
	if got := obs.get().deliveries; got != 1 {
		t.Errorf("delivery delays observed = %d, want 1 (the create; initial events are not changes)", got)
	}
}

// observer records what the server reports to its Observer.
type observer struct {
	mu         sync.Mutex
	deliveries int
	ended      map[string]int
	limits     map[string]int
}

type observed struct {
	deliveries int
	ended      map[string]int
}

func (o *observer) DeliveryObserver(string) func(time.Duration) {
	return func(time.Duration) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.deliveries++
	}
}

func (o *observer) StreamEnded(resource, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended == nil {
		o.ended = map[string]int{}
	}
	o.ended[resource+"/"+reason]++
}

func (o *observer) LimitHit(limit string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.limits == nil {
		o.limits = map[string]int{}
	}
	o.limits[limit]++
}

func (o *observer) limitHits(limit string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.limits[limit]
}

func (o *observer) get() observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	ended := map[string]int{}
	for k, v := range o.ended {
		ended[k] = v
	}
	return observed{o.deliveries, ended}
}

func waitLen(t *testing.T, s *stream, n int) {
	t.Helper()
	if !testenv.Poll(30*time.Second, func() bool { return len(s.lines()) >= n }) {
		t.Fatalf("stream has %v, want %d events", s.lines(), n)
	}
}

func reason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
