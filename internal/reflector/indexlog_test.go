package reflector

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/informerd/informerd/internal/object"
)

// withConditions is a ConfigMap-like object whose index {.status.conditions[0].type}
// fails when failing (the list is empty) and succeeds otherwise.
func withConditions(t *testing.T, name, rv string, failing bool) *object.Raw {
	t.Helper()
	conds := `[{"type":"Ready"}]`
	if failing {
		conds = `[]`
	}
	r, err := object.ParseRaw(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":%q},"status":{"conditions":%s}}`, name, name, rv, conds))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIndexFailureLoggedOnce: an object an index fails on is logged when it
// starts failing, not at each event or relist that finds it failing still;
// after it succeeds, is deleted, or is gone from a relist, a new failure is
// logged again. Every failure is counted.
func TestIndexFailureLoggedOnce(t *testing.T) {
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "cond", JSONPath: "{.status.conditions[0].type}"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecords{}
	r := New(nil, enc, &recordingQueue{}, Options{Name: "configmaps", Log: slog.New(logs)})
	s := (*store)(r)
	type obj struct {
		name, rv string
		failing  bool
	}
	steps := []struct {
		name       string
		op         string // add, update, delete, replace
		objs       []obj
		wantLogged []string // "object@resourceVersion"
	}{
		{name: "added failing", op: "add", objs: []obj{{"a", "1", true}}, wantLogged: []string{"ns/a@1"}},
		{name: "updated failing still", op: "update", objs: []obj{{"a", "2", true}}},
		{name: "updated succeeding", op: "update", objs: []obj{{"a", "3", false}}},
		{name: "updated failing again", op: "update", objs: []obj{{"a", "4", true}}, wantLogged: []string{"ns/a@4"}},
		{name: "deleted", op: "delete", objs: []obj{{"a", "5", true}}},
		{name: "created again failing", op: "add", objs: []obj{{"a", "6", true}}, wantLogged: []string{"ns/a@6"}},
		{name: "relist without it", op: "replace", objs: []obj{{"b", "7", true}}, wantLogged: []string{"ns/b@7"}},
		{name: "relist with it", op: "replace", objs: []obj{{"a", "8", true}, {"b", "7", true}}, wantLogged: []string{"ns/a@8"}},
	}
	failures := int64(0)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := len(logs.at(slog.LevelWarn))
			var list []any
			for _, o := range st.objs {
				u := withConditions(t, o.name, o.rv, o.failing)
				if o.failing {
					failures++
				}
				var err error
				switch st.op {
				case "add":
					err = s.Add(u)
				case "update":
					err = s.Update(u)
				case "delete":
					err = s.Delete(u)
				case "replace":
					list = append(list, u)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if st.op == "replace" {
				if err := s.Replace(list, st.objs[0].rv); err != nil {
					t.Fatal(err)
				}
			}
			var logged []string
			for _, l := range logs.at(slog.LevelWarn, "object", "resourceVersion", "index")[before:] {
				if l["index"] != "cond" {
					t.Errorf("logged index %q, want cond", l["index"])
				}
				logged = append(logged, l["object"]+"@"+l["resourceVersion"])
			}
			if diff := cmp.Diff(st.wantLogged, logged); diff != "" {
				t.Errorf("logged failures (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]int64{0, failures}, enc.IndexErrors()); diff != "" {
		t.Errorf("IndexErrors (-want +got):\n%s", diff)
	}
}

// TestIndexFailuresBounded: past maxFailing objects, failures are no longer
// remembered or logged one by one; one line says so.
func TestIndexFailuresBounded(t *testing.T) {
	logs := &logRecords{}
	f := &indexFailures{log: slog.New(logs)}
	failed := []object.IndexError{{Index: "cond", Err: fmt.Errorf("out of range")}}
	for i := range maxFailing + 10 {
		f.queued(&object.Object{Key: fmt.Sprintf("ns/o-%d", i), ResourceVersion: "1"}, failed)
	}
	if got := len(f.failing); got != maxFailing {
		t.Errorf("remembers %d objects, want at most %d", got, maxFailing)
	}
	if got, want := len(logs.at(slog.LevelWarn)), maxFailing+1; got != want {
		t.Errorf("%d lines logged, want %d: one per remembered object and one for the rest", got, want)
	}
}
