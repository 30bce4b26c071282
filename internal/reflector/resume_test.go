package reflector

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/object"
)

// TestResumeWatchStopsOpening: once stopped, the resumed watch stops every
// upstream watch it opened, and opens at most the one that raced with
// Stop.
func TestResumeWatchStopsOpening(t *testing.T) {
	for range 500 {
		r := &Reflector{}
		var after atomic.Int32
		var w *resumeWatch
		var mu sync.Mutex
		var opened []*watch.FakeWatcher
		ready := make(chan struct{})
		open := func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			<-ready
			select {
			case <-w.stop:
				after.Add(1)
			default:
			}
			fw := watch.NewFakeWithChanSize(1, false)
			raw, _ := object.ParseRaw([]byte(`{"metadata":{"name":"a","resourceVersion":"11"}}`))
			fw.Add(raw)
			mu.Lock()
			opened = append(opened, fw)
			mu.Unlock()
			return fw, nil
		}
		w = r.newResumeWatch(context.Background(), "10", open)
		close(ready)
		<-w.ResultChan() // the initial-events-end bookmark
		<-w.ResultChan() // the event
		w.Stop()
		for range w.ResultChan() {
		}
		r.watches.Wait()
		if after.Load() > 1 {
			t.Fatalf("%d upstream watches opened after Stop, want at most the one racing with it", after.Load())
		}
		mu.Lock()
		for i, fw := range opened {
			if !fw.IsStopped() {
				t.Fatalf("upstream watch %d of %d left open after Stop", i+1, len(opened))
			}
		}
		mu.Unlock()
	}
}

// TestResumeWatchRefusals: what the API server answers decides whether the
// resumed watch retries or hands over to client-go, which lists.
func TestResumeWatchRefusals(t *testing.T) {
	gr := schema.GroupResource{Resource: "widgets"}
	tooLarge := apierrors.NewTimeoutError("Too large resource version", 1)
	tooLarge.ErrStatus.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}}
	tests := []struct {
		name    string
		errs    []error // answers to the opens, then a watch that stays open
		refused bool
	}{
		{name: "410", errs: []error{apierrors.NewResourceExpired("too old")}, refused: true},
		{name: "404: the CRD is gone", errs: []error{apierrors.NewNotFound(gr, "")}, refused: true},
		{name: "unreachable, then open", errs: []error{errors.New("connection refused"), apierrors.NewServiceUnavailable("starting")}},
		{name: "too large: client-go lists, and the list decides", errs: []error{tooLarge}, refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reflector{}
			var opens atomic.Int32
			open := func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
				if n := int(opens.Add(1)); n <= len(tc.errs) {
					return nil, tc.errs[n-1]
				}
				fw := watch.NewFakeWithChanSize(1, false)
				raw, _ := object.ParseRaw([]byte(`{"metadata":{"name":"a","resourceVersion":"11"}}`))
				fw.Add(raw)
				return fw, nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := r.newResumeWatch(ctx, "10", open)
			if ev := <-w.ResultChan(); ev.Type != watch.Bookmark {
				t.Fatalf("first event %v, want the initial-events-end bookmark", ev.Type)
			}
			ev := <-w.ResultChan()
			if got := ev.Type == watch.Error; got != tc.refused {
				t.Errorf("after %v: %v, refused = %v, want %v", tc.errs, ev, got, tc.refused)
			}
			w.Stop()
			for range w.ResultChan() {
			}
			r.watches.Wait()
		})
	}
}

// TestListOlderThanRestored: a list older than the restored resourceVersion
// is refused and reported, once, as another etcd history; the list that
// answers the resume, and later ones, pass.
func TestListOlderThanRestored(t *testing.T) {
	var foreign []error
	s := &resumeState{rv: "100", from: 100, foreign: func(err error) { foreign = append(foreign, err) }}
	if rv := s.take(); rv != "100" || !s.skipReplace(nil, "100") {
		t.Fatal("the resumed first list is not skipped")
	}
	for _, rv := range []string{"100", "150"} {
		if err := s.checkList(rv); err != nil {
			t.Errorf("a list at %s after resuming from 100: %v", rv, err)
		}
	}
	for range 2 {
		if err := s.checkList("40"); err == nil || !strings.Contains(err.Error(), "another etcd history") {
			t.Errorf("a list at 40 after resuming from 100: %v", err)
		}
	}
	if len(foreign) != 1 {
		t.Errorf("foreign told %d times, want once", len(foreign))
	}
}
