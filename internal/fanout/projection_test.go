package fanout

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/projection"
)

// jsonPod is a pod with JSON, on node, with label app and phase.
func jsonPod(name string, rv int, node, app, phase string) *object.Object {
	o := pod(name, rv, node)
	o.Labels = object.Labels{"app", app}
	o = o.WithJSON(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d","labels":{"app":%q}},`+
		`"spec":{"nodeName":%q},"status":{"phase":%q,"conditions":[{"type":"Ready","lastProbeTime":"%d"}]}}`, name, o.UID, rv, app, node, phase, rv))
	return o
}

func (r *rig) write(o *object.Object, typ watch.EventType) {
	r.ix.Apply([]deltafifo.Delta{{Type: typ, Object: o, ResourceVersion: o.ResourceVersion}})
}

func mask(t testing.TB, paths ...string) *projection.Mask {
	t.Helper()
	m, err := projection.Compile(paths)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEncodedOncePerMask: 500 watchers over 3 distinct masks (and some
// with none) project each event once per mask the event touches, not once
// per watcher.
func TestEncodedOncePerMask(t *testing.T) {
	r := newRig(t, 100, 100, jsonPod("a", 1, "n1", "web", "Running"), jsonPod("b", 2, "n2", "web", "Running"))
	masks := [][]string{{"metadata.labels"}, {"status.phase"}, {"metadata.labels", "spec.nodeName"}, nil}
	var ws []*Watcher
	for i := range 500 {
		// Every mask is used on both nodes; the last is spelt two ways.
		paths := masks[i%len(masks)]
		if i%12 == 6 {
			paths = []string{"spec.nodeName", "metadata.labels"}
		}
		w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n" + strconv.Itoa(1+i/4%2)), Mask: mask(t, paths...)})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if got := r.hub.Stats().Projections; got != 3 {
		t.Fatalf("Stats().Projections = %d, want 3 distinct masks", got)
	}
	before := r.hub.Stats()
	// A change on n1 only: every mask is touched, once.
	r.write(jsonPod("a", 101, "n1", "api", "Pending"), watch.Modified)
	after := r.hub.Stats()
	if got := after.ProjectionEncodes - before.ProjectionEncodes; got != 3 {
		t.Errorf("one event to 250 watchers over 3 masks: %d projections, want 3", got)
	}
	if got := after.ProjectionCompares - before.ProjectionCompares; got != 3 {
		t.Errorf("one MODIFIED over 3 masks: %d earlier states projected, want 3", got)
	}
	// Every watcher on n1 got the object as its mask shows it.
	for i, w := range ws {
		items := drain(t, w)
		if i/4%2 == 1 {
			if len(items) != 0 {
				t.Errorf("watcher %d on n2 got %d items", i, len(items))
			}
			continue
		}
		if len(items) != 1 {
			t.Fatalf("watcher %d on n1 got %d items, want 1", i, len(items))
		}
		paths := masks[i%len(masks)]
		if i%12 == 6 {
			paths = []string{"spec.nodeName", "metadata.labels"}
		}
		want, _ := mask(t, paths...).Project(jsonOf(jsonPod("a", 101, "n1", "api", "Pending")))
		if got := jsonOf(items[0].Object); string(got) != string(want) {
			t.Errorf("watcher %d (%q) got %s, want %s", i, paths, got, want)
		}
	}
	for _, w := range ws {
		w.Close()
	}
	if got := r.hub.Stats().Projections; got != 0 {
		t.Errorf("after every watcher closed, %d masks are still tracked", got)
	}
}

// TestUnchangedProjectionIsNotSent: a heartbeat that changes no field a
// watcher's mask keeps sends it nothing; its bookmarks carry its
// resourceVersion past the change, and a watch resumed from the last one
// misses nothing after it.
func TestUnchangedProjectionIsNotSent(t *testing.T) {
	r := newRig(t, 100, 100, jsonPod("a", 1, "n1", "web", "Running"))
	m := mask(t, "metadata.labels", "status.phase")
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), Mask: m, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	full, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1")})
	if err != nil {
		t.Fatal(err)
	}
	r.write(jsonPod("a", 101, "n1", "web", "Running"), watch.Modified) // a heartbeat
	r.write(jsonPod("a", 102, "n1", "web", "Running"), watch.Modified) // another
	if got := render(drain(t, w)); len(got) != 0 {
		t.Errorf("heartbeats sent to a watcher whose mask hides them: %v", got)
	}
	if got := render(drain(t, full)); len(got) != 2 {
		t.Errorf("the whole-object watcher got %v, want both heartbeats", got)
	}
	it, ok := w.IdleBookmark()
	if !ok || it.ResourceVersion != "102" {
		t.Fatalf("IdleBookmark after hidden changes = %v, %v; want a BOOKMARK at 102", it, ok)
	}
	r.write(jsonPod("a", 103, "n1", "web", "Pending"), watch.Modified) // shown
	r.write(jsonPod("a", 104, "n1", "web", "Pending"), watch.Modified) // hidden
	r.write(jsonPod("a", 105, "n1", "api", "Pending"), watch.Modified) // shown
	r.write(jsonPod("a", 106, "n1", "api", "Pending"), watch.Deleted)  // shown
	want := []string{"MODIFIED 103 a", "MODIFIED 105 a", "DELETED 106 a"}
	if diff := cmp.Diff(want, render(drain(t, w))); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
	// A client that resumes from the bookmark gets the same, from history.
	resumed, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), Mask: m, ResourceVersion: it.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, render(drain(t, resumed))); diff != "" {
		t.Errorf("resumed from the bookmark (-want +got):\n%s", diff)
	}
}

// TestSelectionOnTheWholeObject: a mask that hides the field a selection
// reads still sees the object enter and leave the selection.
func TestSelectionOnTheWholeObject(t *testing.T) {
	r := newRig(t, 100, 100, jsonPod("a", 1, "n1", "web", "Running"))
	w, _, _, err := r.hub.Watch(WatchOptions{Selection: onNode("n1"), Mask: mask(t, "status.phase")})
	if err != nil {
		t.Fatal(err)
	}
	r.write(jsonPod("a", 101, "n2", "web", "Running"), watch.Modified) // leaves; nodeName hidden
	r.write(jsonPod("a", 102, "n1", "web", "Running"), watch.Modified) // comes back
	want := []string{"DELETED 101 a", "ADDED 102 a"}
	if diff := cmp.Diff(want, render(drain(t, w))); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestTooManyProjections(t *testing.T) {
	ix := newRig(t, 10, 10).ix
	hub := New(ix, Options{MaxProjections: 2})
	t.Cleanup(func() { hub.Close(nil) })
	var ws []*Watcher
	for _, p := range []string{"status.phase", "metadata.labels", "status.phase"} {
		w, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}, Mask: mask(t, p)})
		if err != nil {
			t.Fatalf("mask %s: %v", p, err)
		}
		ws = append(ws, w)
	}
	_, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}, Mask: mask(t, "spec")})
	var tooMany *TooManyProjectionsError
	if !errors.As(err, &tooMany) || tooMany.Limit != 2 {
		t.Fatalf("a third distinct mask: %v, want TooManyProjectionsError", err)
	}
	if _, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}}); err != nil {
		t.Errorf("a watch without a mask past the bound: %v", err)
	}
	ws[1].Close()
	if _, _, _, err := hub.Watch(WatchOptions{Selection: Selection{Index: -1}, Mask: mask(t, "spec")}); err != nil {
		t.Errorf("a mask once another is no longer used: %v", err)
	}
}
