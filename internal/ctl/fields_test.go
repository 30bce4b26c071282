package ctl_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/ctl"
	"github.com/informerd/informerd/internal/testenv"
)

func TestSplitFields(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      string
	}{
		{name: "none", in: "", want: nil},
		{name: "blank", in: "  ", want: nil},
		{name: "one", in: "metadata.labels", want: []string{"metadata.labels"}},
		{name: "several, spaces trimmed", in: "metadata.name, metadata.labels ,status.podIP", want: []string{"metadata.name", "metadata.labels", "status.podIP"}},
		{name: "dots in backquotes", in: "metadata.labels.`app.kubernetes.io/name`,status.podIP", want: []string{"metadata.labels.`app.kubernetes.io/name`", "status.podIP"}},
		{name: "a comma in backquotes", in: "metadata.annotations.`a,b`,spec", want: []string{"metadata.annotations.`a,b`", "spec"}},
		{name: "an empty path", in: "metadata.name,,spec", err: "an empty path"},
		{name: "a trailing comma", in: "metadata.name,", err: "an empty path"},
		{name: "an unclosed backquote", in: "metadata.labels.`app,spec", err: "a backquote is not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ctl.SplitFields(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("SplitFields(%q) = %q, %v; want an error saying %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SplitFields(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// FuzzSplitFields: paths are never empty and hold no space at either end,
// and joining them with commas and splitting again gives them back.
func FuzzSplitFields(f *testing.F) {
	for _, s := range []string{"metadata.labels,status.podIP", "metadata.labels.`a.b/c`, spec", "`a,b`,c", "a,,b", "`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		paths, err := ctl.SplitFields(s)
		if err != nil {
			return
		}
		for _, p := range paths {
			if p == "" || strings.TrimSpace(p) != p {
				t.Fatalf("SplitFields(%q) = %q: an empty or untrimmed path", s, paths)
			}
		}
		again, err := ctl.SplitFields(strings.Join(paths, ","))
		if err != nil || !slices.Equal(paths, again) {
			t.Fatalf("SplitFields(%q) = %q, but splitting them joined gives %q, %v", s, paths, again, err)
		}
	})
}

// objectKeys returns the members of a JSON object and of its metadata.
func objectKeys(t *testing.T, obj json.RawMessage) (top, meta []string) {
	t.Helper()
	var o struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(obj, &all); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, obj)
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		t.Fatalf("no metadata: %v\n%s", err, obj)
	}
	for k := range all {
		top = append(top, k)
	}
	for k := range o.Metadata {
		meta = append(meta, k)
	}
	slices.Sort(top)
	slices.Sort(meta)
	return top, meta
}

var (
	identityKeys = []string{"apiVersion", "kind", "metadata"}
	labelledMeta = []string{"labels", "name", "namespace", "resourceVersion", "uid"}
)

// TestFields: get, list and watch with --fields print only those fields,
// and a watch prints no change to other fields.
func TestFields(t *testing.T) {
	const ns = "ctl-fields"
	srv, kube := setup(t, ns)
	ctx := context.Background()
	a := "--address=" + srv.Addr

	t.Run("get", func(t *testing.T) {
		out, errOut, code := run(ctx, a, "get", "configmaps", "b", "-n", ns, "--fields", "metadata.labels", "-o", "json")
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, errOut)
		}
		top, meta := objectKeys(t, json.RawMessage(out))
		if diff := cmp.Diff([][]string{identityKeys, labelledMeta}, [][]string{top, meta}); diff != "" {
			t.Errorf("get --fields metadata.labels: members (-want +got):\n%s\n%s", diff, out)
		}
	})
	t.Run("list", func(t *testing.T) {
		out, errOut, code := run(ctx, a, "list", "configmaps", "-n", ns, "--fields", "metadata.labels.`app`, metadata.creationTimestamp", "-o", "json")
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, errOut)
		}
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 3 {
			t.Fatalf("list printed %s (%v), want 3 items", out, err)
		}
		for _, it := range l.Items {
			top, meta := objectKeys(t, it)
			want := [][]string{identityKeys, {"creationTimestamp", "labels", "name", "namespace", "resourceVersion", "uid"}}
			if diff := cmp.Diff(want, [][]string{top, meta}); diff != "" {
				t.Errorf("an item's members (-want +got):\n%s\n%s", diff, it)
			}
		}
		// The table's AGE comes from the creationTimestamp asked for.
		table, _, _ := run(ctx, a, "list", "configmaps", "-n", ns, "--fields", "metadata.creationTimestamp")
		if strings.Contains(table, "<unknown>") {
			t.Errorf("a table with metadata.creationTimestamp has no AGE:\n%s", table)
		}
	})
	t.Run("watch", func(t *testing.T) {
		w := &syncBuffer{}
		errOut := &syncBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- ctl.Execute(ctx, []string{a, "watch", "configmaps", "-n", ns, "--fields", "metadata.labels", "-o", "json", "--max-events", "4"}, w, errOut)
		}()
		testenv.Eventually(t, time.Minute, "the three current objects", func() bool { return len(events(t, w.String())) >= 3 })
		cms := kube.CoreV1().ConfigMaps(ns)
		// A change to data, which the mask hides, then one to labels.
		if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		shown, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "api"}}}, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, errOut)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the watch did not print 4 events within a minute; printed:\n%s", w)
		}
		type ev struct{ Type, Name, RV string }
		var got []ev
		for _, e := range events(t, w.String()) {
			got = append(got, ev{e.Type, e.Object.Metadata.Name, e.ResourceVersion})
		}
		for _, line := range strings.Split(strings.TrimSpace(w.String()), "\n") {
			var e struct {
				Object json.RawMessage `json:"object"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("watch printed %q: %v", line, err)
			}
			if top, meta := objectKeys(t, e.Object); !cmp.Equal([][]string{identityKeys, labelledMeta}, [][]string{top, meta}) {
				t.Errorf("an object beyond --fields metadata.labels: %s", e.Object)
			}
		}
		if len(got) != 4 {
			t.Fatalf("printed %d events, want 4:\n%s", len(got), w)
		}
		want := []ev{{"ADDED", "a", got[0].RV}, {"ADDED", "b", got[1].RV}, {"ADDED", "c", got[2].RV}, {"MODIFIED", "a", shown.ResourceVersion}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got); the change to c's data is hidden:\n%s", diff)
		}
	})
}
