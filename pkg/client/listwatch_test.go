package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
	"github.com/informerd/informerd/pkg/client"
)

// next receives the next event, failing the test after a while.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	return watch.Event{}
}

func rv(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}

type seen struct {
	Type       watch.EventType
	Name, RV   string
	InitialEnd bool
}

func describe(ev watch.Event) seen {
	if ev.Type == watch.Error {
		return seen{Type: ev.Type, Name: fmt.Sprint(ev.Object)}
	}
	cm := ev.Object.(*corev1.ConfigMap)
	return seen{Type: ev.Type, Name: cm.Name, RV: cm.ResourceVersion, InitialEnd: cm.Annotations[metav1.InitialEventsAnnotationKey] == "true"}
}

// TestListWatch calls the ListWatch directly against a real informerd:
// lists (whole and in pages, at least at a resourceVersion), a streaming
// list with its end bookmark, changes with their resourceVersions (a
// deletion's included), resume, and how the watch ends on shutdown.
func TestListWatch(t *testing.T) {
	noLeaks(t)
	const ns = "listwatch"
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	namespace(t, kube, ns)
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"set": "abc"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := testserver.Start(t, env.Config, "resources: [{resource: configmaps}]", testserver.Options{})
	lw, err := client.NewListWatch(dial(t, srv.Addr), &corev1.ConfigMap{}, client.Options{Resource: "configmaps", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	want := apiServerState(t, kube, ns)
	var listRV string
	testenv.Eventually(t, time.Minute, "informerd to list the three configmaps", func() bool {
		obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		list := obj.(*corev1.ConfigMapList)
		listRV = list.ResourceVersion
		got := versions{}
		for _, cm := range list.Items {
			got[cm.Name] = cm.ResourceVersion
		}
		return cmp.Equal(want, got)
	})

	t.Run("kind not served", func(t *testing.T) {
		secrets, err := client.NewListWatch(dial(t, srv.Addr), &corev1.Secret{}, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := secrets.ListWithContext(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "served: configmaps") {
			t.Errorf("list secrets: %v, want 404 naming the served resources", err)
		}
	})

	t.Run("pages", func(t *testing.T) {
		var names []string
		opts := metav1.ListOptions{Limit: 2, LabelSelector: "set=abc"}
		for {
			obj, err := lw.ListWithContext(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			list := obj.(*corev1.ConfigMapList)
			if len(list.Items) > 2 {
				t.Fatalf("a page of limit 2 has %d items", len(list.Items))
			}
			for _, cm := range list.Items {
				names = append(names, cm.Name)
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, names); diff != "" {
			t.Errorf("paged list (-want +got):\n%s", diff)
		}
	})

	t.Run("streaming list, then changes", func(t *testing.T) {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: listRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var got []seen
		for range 4 {
			got = append(got, describe(next(t, w)))
		}
		wantEvents := []seen{
			{Type: watch.Added, Name: "a", RV: want["a"]},
			{Type: watch.Added, Name: "b", RV: want["b"]},
			{Type: watch.Added, Name: "c", RV: want["c"]},
			{Type: watch.Bookmark, RV: got[3].RV, InitialEnd: true},
		}
		if diff := cmp.Diff(wantEvents, got); diff != "" {
			t.Errorf("initial events (-want +got):\n%s", diff)
		}
		if rv(t, got[3].RV) < rv(t, listRV) {
			t.Errorf("the initial-events-end bookmark is at %s, before the list's %s", got[3].RV, listRV)
		}

		created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		added, deleted := describe(next(t, w)), describe(next(t, w))
		if added != (seen{Type: watch.Added, Name: "d", RV: created.ResourceVersion}) {
			t.Errorf("after a create: %+v, want ADDED d at %s", added, created.ResourceVersion)
		}
		if deleted.Type != watch.Deleted || deleted.Name != "a" || rv(t, deleted.RV) <= rv(t, created.ResourceVersion) {
			t.Errorf("after a delete: %+v, want DELETED a at a resourceVersion after %s", deleted, created.ResourceVersion)
		}

		// Resume from the create: exactly the deletion follows.
		w2, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Stop()
		if got := describe(next(t, w2)); got != deleted {
			t.Errorf("resumed from %s: %+v, want %+v", created.ResourceVersion, got, deleted)
		}

		// Shutdown ends the watch without an error event: the reflector
		// watches again from its resourceVersion.
		srv.Stop()
		for closed := false; !closed; {
			select {
			case ev, ok := <-w.ResultChan():
				// Bookmarks may come at any time; nothing else may.
				if ok && ev.Type != watch.Bookmark {
					t.Fatalf("after shutdown: %+v, want the channel closed", describe(ev))
				}
				closed = !ok
			case <-time.After(30 * time.Second):
				t.Fatal("the watch did not end within 30s of informerd's shutdown")
			}
		}
		// informerd down: the ListWatch retries until informerd is back
		// or the call's context ends; with NoRetry the reflector gets a
		// 429, backs off and retries.
		down, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := lw.WatchWithContext(down, metav1.ListOptions{ResourceVersion: created.ResourceVersion}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("watch while informerd is down: %v, want the context's end (retrying until then)", err)
		}
		noRetry, err := client.NewListWatch(dial(t, srv.Addr), &corev1.ConfigMap{}, client.Options{Resource: "configmaps", Namespace: ns, NoRetry: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := noRetry.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion}); !apierrors.IsTooManyRequests(err) {
			t.Errorf("watch with NoRetry while informerd is down: %v, want 429 (retry)", err)
		}
	})
}

// TestErrors checks that informerd's refusals reach client-go as the API
// server's would, with the reason kept.
func TestErrors(t *testing.T) {
	srv := testserver.Start(t, env.Config, "resources: [{resource: configmaps}, {resource: gadgets.v1.example.com}]", testserver.Options{})
	c := dial(t, srv.Addr)
	ctx := context.Background()
	cms, err := client.NewListWatch(c, &corev1.ConfigMap{}, client.Options{Resource: "configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the configmaps cache to sync", func() bool {
		_, err := cms.ListWithContext(ctx, metav1.ListOptions{})
		return err == nil
	})
	lwFor := func(o client.Options) *client.ListWatch {
		lw, err := client.NewListWatch(c, &corev1.ConfigMap{}, o)
		if err != nil {
			t.Fatal(err)
		}
		return lw
	}
	tests := []struct {
		name   string
		call   func() error
		is     func(error) bool
		reason pb.ErrorReason
	}{
		{name: "watch from a resourceVersion before the history", is: apierrors.IsResourceExpired, reason: pb.ErrorReason_RESOURCE_VERSION_TOO_OLD,
			call: func() error {
				_, err := cms.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "1"})
				return err
			}},
		{name: "cache not synced (no such CRD)", is: apierrors.IsTooManyRequests, reason: pb.ErrorReason_CACHE_NOT_SYNCED,
			call: func() error {
				// Without NoRetry the ListWatch would retry until the CRD
				// is installed.
				_, err := lwFor(client.Options{Resource: "gadgets.v1.example.com", NoRetry: true}).ListWithContext(ctx, metav1.ListOptions{})
				return err
			}},
		{name: "unknown resource", is: apierrors.IsNotFound, reason: pb.ErrorReason_RESOURCE_NOT_SERVED,
			call: func() error {
				_, err := lwFor(client.Options{Resource: "nope"}).ListWithContext(ctx, metav1.ListOptions{})
				return err
			}},
		{name: "kind not served while a resource is not resolved", is: apierrors.IsTooManyRequests,
			call: func() error {
				lw, err := client.NewListWatch(c, &corev1.Secret{}, client.Options{})
				if err != nil {
					return err
				}
				_, err = lw.ListWithContext(ctx, metav1.ListOptions{})
				return err
			}},
		{name: "bad label selector", is: apierrors.IsBadRequest,
			call: func() error {
				_, err := cms.ListWithContext(ctx, metav1.ListOptions{LabelSelector: "a in (b"})
				return err
			}},
		{name: "unknown index", is: apierrors.IsBadRequest,
			call: func() error {
				_, err := lwFor(client.Options{Resource: "configmaps", Index: "node", IndexValues: []string{"n"}}).WatchWithContext(ctx, metav1.ListOptions{})
				return err
			}},
		{name: "field selector other than namespace", is: apierrors.IsBadRequest,
			call: func() error {
				_, err := cms.ListWithContext(ctx, metav1.ListOptions{FieldSelector: "metadata.name=x"})
				return err
			}},
		{name: "exact resourceVersion", is: apierrors.IsBadRequest,
			call: func() error {
				_, err := cms.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "5", ResourceVersionMatch: metav1.ResourceVersionMatchExact})
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !tt.is(err) {
				t.Fatalf("error %v (reason %s): not the expected API status", err, apierrors.ReasonForError(err))
			}
			if got := client.ReasonOf(err); got != tt.reason {
				t.Errorf("reason %s, want %s", got, tt.reason)
			}
		})
	}
}

// TestFromError checks the mapping of every status code informerd returns.
func TestFromError(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		is   func(error) bool
	}{
		{"out of range is 410 Expired", codes.OutOfRange, apierrors.IsResourceExpired},
		{"not found", codes.NotFound, apierrors.IsNotFound},
		{"invalid argument is 400", codes.InvalidArgument, apierrors.IsBadRequest},
		{"unauthenticated is 401", codes.Unauthenticated, apierrors.IsUnauthorized},
		{"permission denied is 403", codes.PermissionDenied, apierrors.IsForbidden},
		{"resource exhausted is 429", codes.ResourceExhausted, apierrors.IsTooManyRequests},
		{"unavailable is 429, retried", codes.Unavailable, apierrors.IsTooManyRequests},
		{"deadline exceeded is 504", codes.DeadlineExceeded, apierrors.IsTimeout},
		{"internal is 500", codes.Internal, apierrors.IsInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := client.FromError(status.Error(tt.code, "msg"))
			if !tt.is(err) {
				t.Errorf("%v: wrong API status %+v", err, apierrors.ReasonForError(err))
			}
			if status.Code(err) != tt.code {
				t.Errorf("status.Code = %s, want %s kept", status.Code(err), tt.code)
			}
		})
	}
	if err := client.FromError(context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("a context error changed to %v", err)
	}
	if err := client.FromError(status.Error(codes.Canceled, "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("CANCELED is %v, want context.Canceled", err)
	}
}
