package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/ctl"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
	"github.com/informerd/informerd/pkg/client"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// run runs informerctl with args and returns what it printed and its exit
// status.
func run(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = ctl.Execute(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// setup runs informerd with the configmaps of a new namespace ns (a and c
// labelled app=web, b app=db, indexed by app).
func setup(t *testing.T, ns string) (*testserver.Server, *kubernetes.Clientset) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]string{"a": "web", "b": "db", "c": "web"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := testserver.Start(t, env.Config, fmt.Sprintf(`
resources:
  - resource: configmaps
    namespace: %s
    indexes: [{name: app, label: app}]
`, ns), testserver.Options{Metrics: true})
	p, _ := srv.Set().Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "informerd to cache the three configmaps", func() bool {
		return p.Cache().Stats().Objects == 3
	})
	return srv, kube
}

type list struct {
	Kind     string            `json:"kind"`
	Metadata map[string]string `json:"metadata"`
	Items    []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

func itemNames(t *testing.T, out string, fromYAML bool) []string {
	t.Helper()
	b := []byte(out)
	if fromYAML {
		var err error
		if b, err = yaml.YAMLToJSON(b); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, out)
		}
	}
	var l list
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("not a JSON list: %v\n%s", err, out)
	}
	if l.Kind != "List" || l.Metadata["resourceVersion"] == "" {
		t.Errorf("list kind %q, resourceVersion %q; want List and a resourceVersion", l.Kind, l.Metadata["resourceVersion"])
	}
	var names []string
	for _, it := range l.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

func TestGetListResources(t *testing.T) {
	const ns = "ctl-get"
	srv, _ := setup(t, ns)
	ctx := context.Background()
	a := "--address=" + srv.Addr
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{name: "list -o name", args: []string{"list", "configmaps", "-n", ns, "-o", "name"}, check: func(t *testing.T, out string) {
			if out != "configmaps/a\nconfigmaps/b\nconfigmaps/c\n" {
				t.Errorf("output %q", out)
			}
		}},
		{name: "list in pages of one", args: []string{"list", "configmaps", "--limit", "1", "-o", "name"}, check: func(t *testing.T, out string) {
			if out != "configmaps/a\nconfigmaps/b\nconfigmaps/c\n" {
				t.Errorf("output %q", out)
			}
		}},
		{name: "list by label, JSON", args: []string{"list", "configmaps", "-n", ns, "-l", "app=web", "-o", "json"}, check: func(t *testing.T, out string) {
			if diff := cmp.Diff([]string{"a", "c"}, itemNames(t, out, false)); diff != "" {
				t.Error(diff)
			}
		}},
		{name: "list by index, YAML", args: []string{"list", "configmaps", "--index", "app=db", "-o", "yaml"}, check: func(t *testing.T, out string) {
			if diff := cmp.Diff([]string{"b"}, itemNames(t, out, true)); diff != "" {
				t.Error(diff)
			}
		}},
		{name: "list table", args: []string{"list", "configmaps"}, check: func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME RESOURCEVERSION AGE" || strings.Fields(lines[1])[1] != "a" {
				t.Errorf("table:\n%s", out)
			}
		}},
		{name: "get TYPE lists, as kubectl", args: []string{"get", "configmaps", "-n", ns, "-o", "name"}, check: func(t *testing.T, out string) {
			if out != "configmaps/a\nconfigmaps/b\nconfigmaps/c\n" {
				t.Errorf("output %q", out)
			}
		}},
		{name: "get -A", args: []string{"get", "configmaps", "-A", "-l", "app=db", "-o", "name"}, check: func(t *testing.T, out string) {
			if out != "configmaps/b\n" {
				t.Errorf("output %q", out)
			}
		}},
		{name: "get -o wide", args: []string{"get", "configmaps", "-n", ns, "--index", "app=web", "-o", "wide"}, check: func(t *testing.T, out string) {
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				got = append(got, f[0]+" "+f[len(f)-1])
			}
			if diff := cmp.Diff([]string{"NAME LABELS", "a app=web", "c app=web"}, got); diff != "" {
				t.Errorf("wide table (-want +got):\n%s\n%s", diff, out)
			}
		}},
		{name: "get TYPE/NAME", args: []string{"get", "configmaps/b", "-n", ns, "-o", "name"}, check: func(t *testing.T, out string) {
			if out != "configmaps/b\n" {
				t.Errorf("output %q", out)
			}
		}},
		{name: "get JSON", args: []string{"get", "configmaps", "b", "-n", ns, "-o", "json"}, check: func(t *testing.T, out string) {
			var cm corev1.ConfigMap
			if err := json.Unmarshal([]byte(out), &cm); err != nil || cm.Name != "b" || cm.Kind != "ConfigMap" || cm.Labels["app"] != "db" {
				t.Errorf("get printed %s (%v)", out, err)
			}
		}},
		{name: "get YAML", args: []string{"get", "configmaps", "b", "-n", ns, "-o", "yaml"}, check: func(t *testing.T, out string) {
			if !strings.Contains(out, "\n  name: b\n") || !strings.Contains(out, "kind: ConfigMap\n") {
				t.Errorf("get printed\n%s", out)
			}
		}},
		{name: "resources JSON", args: []string{"resources", "-o", "json"}, check: func(t *testing.T, out string) {
			var got struct {
				Resources []struct {
					Name    string   `json:"name"`
					Kind    string   `json:"kind"`
					Synced  bool     `json:"synced"`
					Objects int      `json:"objects"`
					Indexes []string `json:"indexes"`
				} `json:"resources"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Resources) != 1 {
				t.Fatalf("resources printed %s (%v)", out, err)
			}
			r := got.Resources[0]
			if r.Name != "configmaps" || r.Kind != "ConfigMap" || !r.Synced || r.Objects != 3 || !cmp.Equal(r.Indexes, []string{"namespace", "app"}) {
				t.Errorf("resources: %+v", r)
			}
		}},
		{name: "resources table", args: []string{"resources"}, check: func(t *testing.T, out string) {
			if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) != 8 || f[0] != "configmaps" || f[4] != "true" || f[6] != "3" || f[7] != "namespace,app" {
				t.Errorf("table:\n%s", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(ctx, append([]string{a}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, errOut)
			}
			tt.check(t, out)
		})
	}
}

// TestErrorMessages checks what informerctl says for each refusal it can
// provoke from a real informerd.
func TestErrorMessages(t *testing.T) {
	const ns = "ctl-errors"
	srv, _ := setup(t, ns)
	unsynced := testserver.Start(t, env.Config, "resources: [{resource: gadgets.v1.example.com}]", testserver.Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "no such object", args: []string{"get", "configmaps", "nope", "-n", ns}, want: []string{"not found:", `"ctl-errors/nope" not found`}},
		{name: "no such object, no namespace", args: []string{"get", "configmaps", "a"}, want: []string{"not found:", "needs -n NAMESPACE"}},
		{name: "no such object to watch", args: []string{"get", "configmaps", "nope", "-n", ns, "-w"}, want: []string{"not found:", `configmaps "nope" in namespace ctl-errors`}},
		{name: "no such resource", args: []string{"list", "widgets"}, want: []string{"not found:", "served: configmaps", "`informerctl resources` lists them"}},
		{name: "bad label selector", args: []string{"list", "configmaps", "-l", "a in ("}, want: []string{"invalid request:", "label_selector"}},
		{name: "unknown index", args: []string{"list", "configmaps", "--index", "node=n1"}, want: []string{"invalid request:", `index "node" does not exist`, "[namespace app]"}},
		{name: "a field not in the schema", args: []string{"list", "configmaps", "--fields", "metadata.labels,metadata.lables"}, want: []string{"invalid request:", "fields", "did you mean labels"}},
		{name: "a malformed field path", args: []string{"get", "configmaps", "a", "-n", ns, "--fields", "metadata..labels"}, want: []string{"invalid request:", "fields", "empty field name"}},
		{name: "a field not in the schema, watched", args: []string{"watch", "configmaps", "--resource-version", "5", "--fields", "dta"}, want: []string{"invalid request:", "fields"}},
		{name: "an empty path in --fields", args: []string{"list", "configmaps", "--fields", "metadata.labels,"}, want: []string{"--fields", "an empty path"}},
		{name: "an unclosed backquote in --fields", args: []string{"list", "configmaps", "--fields", "metadata.labels.`app"}, want: []string{"a backquote is not closed"}},
		{name: "malformed index flag", args: []string{"list", "configmaps", "--index", "app"}, want: []string{"NAME=VALUE"}},
		{name: "resourceVersion too old", args: []string{"watch", "configmaps", "--resource-version", "1"}, want: []string{"resourceVersion too old:", "list again"}},
		{name: "not a resourceVersion", args: []string{"watch", "configmaps", "--resource-version", "x"}, want: []string{"invalid request:", "resource version"}},
		{name: "not synced", args: []string{"--address", unsynced.Addr, "list", "gadgets.v1.example.com"}, want: []string{"not ready:", "has not synced", "informerctl status"}},
		{name: "waiting for a resourceVersion times out", args: []string{"--timeout", "1s", "list", "configmaps", "--min-resource-version", "999999999"}, want: []string{"timed out", "--timeout"}},
		{name: "unknown output", args: []string{"get", "configmaps", "-o", "foo"}, want: []string{`unknown output format "foo": use one of table, wide, json, yaml, name`}},
		{name: "no type", args: []string{"get"}, want: []string{"name a resource type: informerctl get TYPE [NAME]", "informerctl resources"}},
		{name: "too many names", args: []string{"get", "configmaps", "a", "b"}, want: []string{"too many arguments", "one object at a time"}},
		{name: "TYPE/ without a name", args: []string{"get", "configmaps/"}, want: []string{"write TYPE/NAME"}},
		{name: "-n and -A", args: []string{"get", "configmaps", "-n", ns, "-A"}, want: []string{"-n and -A"}},
		{name: "NAME and a selector", args: []string{"get", "configmaps", "a", "-l", "app=web"}, want: []string{"NAME cannot be combined with -l"}},
		{name: "NAME and -A", args: []string{"get", "configmaps", "a", "-A"}, want: []string{"NAME cannot be combined with -A"}},
		{name: "NAME and --limit", args: []string{"get", "configmaps", "a", "--limit", "5"}, want: []string{"apply to lists"}},
		{name: "a watch flag without -w", args: []string{"get", "configmaps", "--resource-version", "5"}, want: []string{"--resource-version applies to watches: add -w"}},
		{name: "resourceVersion 0", args: []string{"watch", "configmaps", "--resource-version", "0"}, want: []string{"--resource-version 0"}},
		{name: "watch an unserved type", args: []string{"watch", "widgets", "--resource-version", "5"}, want: []string{"not found:", `no resource "widgets"`, "served: configmaps"}},
		{name: "watch a type not resolved yet", args: []string{"--address", unsynced.Addr, "watch", "gadgets.v1.example.com", "--resource-version", "5"}, want: []string{"not ready:", "informerctl status"}},
		{name: "nobody listening", args: []string{"--address", "127.0.0.1:1", "resources"}, want: []string{"unavailable", "is it running there"}},
		{name: "plaintext off loopback", args: []string{"--address", "informerd.example:50051", "resources"}, want: []string{"needs TLS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(ctx, append([]string{"--address", srv.Addr}, tt.args...)...)
			if code != 1 {
				t.Fatalf("exit status %d, want 1; stdout %q", code, out)
			}
			if !strings.HasPrefix(errOut, "informerctl: ") {
				t.Errorf("stderr %q does not start with informerctl:", errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

// TestWatch watches through a TCP proxy that the test cuts: informerctl
// prints the current objects, then each change exactly once, in order,
// across the cut, from which it resumes by itself. Another watch started
// from a printed resourceVersion prints exactly the changes after it.
func TestWatch(t *testing.T) {
	const ns = "ctl-watch"
	srv, kube := setup(t, ns)
	ctx := context.Background()
	cms := kube.CoreV1().ConfigMaps(ns)
	proxy, err := testenv.NewProxyTo(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- ctl.Execute(ctx, []string{"--address", proxy.Addr(), "watch", "configmaps", "-n", ns, "-o", "json", "--max-events", "7"}, out, errOut)
	}()
	printed := func(n int) func() bool { return func() bool { return len(events(t, out.String())) >= n } }
	testenv.Eventually(t, time.Minute, "the three current objects", printed(3))

	type ev struct{ Type, Name, RV string }
	want := []ev{{"ADDED", "a", ""}, {"ADDED", "b", ""}, {"ADDED", "c", ""}}
	change := func(typ, name string, f func() (*corev1.ConfigMap, error)) {
		t.Helper()
		cm, err := f()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev{typ, name, cm.ResourceVersion})
	}
	create := func(name string) func() (*corev1.ConfigMap, error) {
		return func() (*corev1.ConfigMap, error) {
			return cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
	}
	change("ADDED", "d", create("d"))
	testenv.Eventually(t, time.Minute, "the create", printed(4))

	proxy.Cut()
	testenv.Eventually(t, time.Minute, "informerctl to notice the cut", func() bool { return strings.Contains(errOut.String(), "the watch broke") })
	change("ADDED", "e", create("e"))
	change("MODIFIED", "a", func() (*corev1.ConfigMap, error) {
		return cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{})
	})
	proxy.Restore()
	var deletedRV string
	change("DELETED", "b", func() (*corev1.ConfigMap, error) {
		if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		return &corev1.ConfigMap{}, nil
	})
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("informerctl did not print 7 events within a minute; printed:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	t.Logf("stderr of the watch:\n%s", errOut)
	var got []ev
	for _, e := range events(t, out.String()) {
		got = append(got, ev{e.Type, e.Object.Metadata.Name, e.Object.Metadata.ResourceVersion})
		if e.Type == "DELETED" {
			deletedRV = e.ResourceVersion
		}
	}
	// The initial objects' and the deletion's resourceVersions are not
	// known in advance.
	for i := range 3 {
		want[i].RV = got[i].RV
	}
	want[6].RV = got[6].RV
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s\nstderr:\n%s", diff, errOut.String())
	}

	// Resume from the create of d: e, a and b follow, nothing else.
	stdout, stderr, code := run(ctx, "--address", srv.Addr, "watch", "configmaps", "-n", ns, "--resource-version", want[3].RV, "--max-events", "3")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	wantTable := fmt.Sprintf("EVENT NAMESPACE NAME RESOURCEVERSION\nADDED %[1]s e %[2]s\nMODIFIED %[1]s a %[3]s\nDELETED %[1]s b %[4]s", ns, want[4].RV, want[5].RV, deletedRV)
	var gotTable []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		gotTable = append(gotTable, strings.Join(strings.Fields(l), " "))
	}
	if diff := cmp.Diff(wantTable, strings.Join(gotTable, "\n")); diff != "" {
		t.Errorf("resumed watch (-want +got):\n%s", diff)
	}
}

// TestGetWatch: get -w prints the list, then every change after it; with
// a NAME only that object's; --watch-only only the changes after it
// started.
func TestGetWatch(t *testing.T) {
	const ns = "ctl-getwatch"
	srv, kube := setup(t, ns)
	cms := kube.CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	type watcher struct {
		out, errOut *syncBuffer
		done        chan int
	}
	start := func(args ...string) watcher {
		w := watcher{&syncBuffer{}, &syncBuffer{}, make(chan int, 1)}
		go func() { w.done <- ctl.Execute(ctx, append([]string{"--address", srv.Addr}, args...), w.out, w.errOut) }()
		return w
	}
	lines := func(w watcher, n int) func() bool {
		return func() bool { return strings.Count(w.out.String(), "\n") >= n }
	}

	only := start("get", "configmaps", "-n", ns, "--watch-only", "-o", "name", "--max-events", "2")
	testenv.Eventually(t, time.Minute, "the --watch-only watch to start", func() bool {
		out, _, _ := run(ctx, "status", "--metrics-address", srv.MetricsURL, "-o", "json")
		return strings.Contains(out, `"watchers": 1`)
	})
	all := start("get", "configmaps", "-n", ns, "-w", "-o", "name", "--max-events", "5")
	one := start("get", "configmaps", "a", "-n", ns, "-w", "-o", "name", "--max-events", "2")
	testenv.Eventually(t, time.Minute, "the lists", func() bool { return lines(all, 3)() && lines(one, 1)() })

	for _, name := range []string{"c", "a"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Data: map[string]string{"k": "v"}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		w    watcher
		want string
	}{
		{"get -w", all, "configmaps/a\nconfigmaps/b\nconfigmaps/c\nconfigmaps/c\nconfigmaps/a\n"},
		{"get NAME -w", one, "configmaps/a\nconfigmaps/a\n"},
		{"get --watch-only", only, "configmaps/c\nconfigmaps/a\n"},
	} {
		select {
		case code := <-tt.w.done:
			if code != 0 {
				t.Errorf("%s: exit status %d: %s", tt.name, code, tt.w.errOut)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not end within a minute; printed:\n%s", tt.name, tt.w.out)
		}
		if diff := cmp.Diff(tt.want, tt.w.out.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

type printedEvent struct {
	Type            string `json:"type"`
	ResourceVersion string `json:"resourceVersion"`
	Object          struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"object"`
}

func events(t *testing.T, out string) []printedEvent {
	var evs []printedEvent
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		var e printedEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("watch printed %q: %v", l, err)
			continue
		}
		evs = append(evs, e)
	}
	return evs
}

// syncBuffer is a bytes.Buffer that one goroutine writes while another
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStatus(t *testing.T) {
	srv, _ := setup(t, "ctl-status")
	ctx := context.Background()
	t.Run("ready", func(t *testing.T) {
		// An open watch shows in the figures only /metrics has.
		wctx, stop := context.WithCancel(ctx)
		watching := make(chan int, 1)
		go func() {
			watching <- ctl.Execute(wctx, []string{"--address", srv.Addr, "watch", "configmaps"}, io.Discard, io.Discard)
		}()
		defer func() { stop(); <-watching }()
		type status struct {
			Ready     bool `json:"ready"`
			Resources []struct {
				health.Resource
				Watchers float64 `json:"watchers"`
			} `json:"resources"`
		}
		var rep status
		testenv.Eventually(t, time.Minute, "status to count the watch", func() bool {
			out, errOut, code := run(ctx, "status", "--metrics-address", srv.MetricsURL, "-o", "json")
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, errOut)
			}
			rep = status{}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			return len(rep.Resources) == 1 && rep.Resources[0].Watchers == 1
		})
		r := rep.Resources[0]
		if !rep.Ready || r.ResourceVersion == "" || r.StalenessSeconds == nil || r.Upstream == nil || r.Upstream.Relists < 1 {
			t.Errorf("status %+v, want ready, a resourceVersion, a staleness and a relist", rep)
		}
		// Three configmaps, under --cache-compression-min-objects: hot.
		json := r.Memory.JSONBytes
		if json <= 0 {
			t.Errorf("memory %+v, want the configmaps' JSON bytes", r.Memory)
		}
		want := health.Resource{Name: "configmaps", Resource: "configmaps", Phase: "Synced", Synced: true, Objects: 3,
			Memory: health.Memory{Compression: "cold", JSONBytes: json, StoredBytes: json, StoredPerObject: json / 3, Hot: 3}}
		if diff := cmp.Diff(want, r.Resource, cmpopts.IgnoreFields(health.Resource{}, "ResourceVersion", "StalenessSeconds", "Upstream")); diff != "" {
			t.Errorf("configmaps (-want +got):\n%s", diff)
		}
		out, _, code := run(ctx, "status", "--metrics-address", strings.TrimPrefix(srv.MetricsURL, "http://"))
		lines := strings.Split(out, "\n")
		if code != 0 || !strings.Contains(out, "ready: every resource has synced") || !strings.HasPrefix(out, "RESOURCE ") ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "configmaps Synced true "+r.ResourceVersion+" 3 ") {
			t.Errorf("table (exit status %d):\n%s", code, out)
		}
	})
	t.Run("not ready", func(t *testing.T) {
		unsynced := testserver.Start(t, env.Config, "resources: [{resource: gadgets.v1.example.com}]", testserver.Options{Metrics: true})
		out, errOut, code := run(ctx, "status", "--metrics-address", unsynced.MetricsURL)
		if code != 1 || !strings.Contains(out, "NOT READY") || !strings.Contains(errOut, "informerd is not ready") {
			t.Errorf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("a /readyz without JSON", func(t *testing.T) {
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "configmaps: Synced rv=1 objects=0") }))
		defer old.Close()
		_, errOut, code := run(ctx, "status", "--metrics-address", old.URL)
		if code != 1 || !strings.Contains(errOut, "not JSON") {
			t.Errorf("exit status %d: %s", code, errOut)
		}
	})
	t.Run("not a metrics address", func(t *testing.T) {
		_, errOut, code := run(ctx, "status", "--metrics-address", "127.0.0.1:1")
		if code != 1 || !strings.Contains(errOut, "cannot reach informerd's metrics endpoint") {
			t.Errorf("exit status %d: %s", code, errOut)
		}
	})
}

// TestExplain covers what informerctl says for every status, by reason
// where the status has one; the messages here are chosen to mislead a
// reader of message text.
func TestExplain(t *testing.T) {
	const msg = "resource is not served"
	withInfo := func(c codes.Code, reason pb.ErrorReason, meta map[string]string) error {
		st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: "informerd.io", Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name   string
		err    error
		want   string
		reason pb.ErrorReason
	}{
		{name: "resource not served", err: withInfo(codes.NotFound, pb.ErrorReason_RESOURCE_NOT_SERVED, nil), reason: pb.ErrorReason_RESOURCE_NOT_SERVED,
			want: "not found: " + msg + " (`informerctl resources` lists them)"},
		{name: "object not found", err: withInfo(codes.NotFound, pb.ErrorReason_OBJECT_NOT_FOUND, nil), reason: pb.ErrorReason_OBJECT_NOT_FOUND,
			want: "not found: " + msg},
		{name: "not found without a reason", err: status.Error(codes.NotFound, msg),
			want: "not found: " + msg},
		{name: "resourceVersion too old", err: withInfo(codes.OutOfRange, pb.ErrorReason_RESOURCE_VERSION_TOO_OLD, nil), reason: pb.ErrorReason_RESOURCE_VERSION_TOO_OLD,
			want: "resourceVersion too old: " + msg + "; list again (`informerctl get TYPE -o json` shows the list's resourceVersion) and watch from that"},
		{name: "continue token expired", err: withInfo(codes.OutOfRange, pb.ErrorReason_CONTINUE_TOKEN_EXPIRED, nil), reason: pb.ErrorReason_CONTINUE_TOKEN_EXPIRED,
			want: "the list's snapshot left informerd's history between two pages: run the list again (a larger --limit needs fewer pages): " + msg},
		{name: "not synced", err: withInfo(codes.Unavailable, pb.ErrorReason_CACHE_NOT_SYNCED, nil), reason: pb.ErrorReason_CACHE_NOT_SYNCED,
			want: "not ready: " + msg + " (`informerctl status` shows each resource's state)"},
		{name: "shutting down", err: withInfo(codes.Unavailable, pb.ErrorReason_SHUTTING_DOWN, nil), reason: pb.ErrorReason_SHUTTING_DOWN,
			want: "informerd is shutting down: " + msg},
		{name: "replica behind", err: withInfo(codes.Unavailable, pb.ErrorReason_RESOURCE_VERSION_AHEAD, nil), reason: pb.ErrorReason_RESOURCE_VERSION_AHEAD,
			want: "this informerd has not caught up with that resourceVersion yet: " + msg + " (another replica may have; or retry)"},
		{name: "auth unavailable", err: withInfo(codes.Unavailable, pb.ErrorReason_AUTH_UNAVAILABLE, nil), reason: pb.ErrorReason_AUTH_UNAVAILABLE,
			want: "informerd cannot check this call's credentials with the API server right now: " + msg},
		{name: "unreachable", err: status.Error(codes.Unavailable, msg),
			want: "informerd at addr is unavailable: " + msg + " (is it running there? check --address and the TLS flags)"},
		{name: "limit", err: withInfo(codes.ResourceExhausted, pb.ErrorReason_LIMIT_EXCEEDED, map[string]string{"limit": "max-watches"}), reason: pb.ErrorReason_LIMIT_EXCEEDED,
			want: "refused by informerd's limit --max-watches: " + msg + "; retry later or close watches you do not need"},
		{name: "slow consumer", err: withInfo(codes.ResourceExhausted, pb.ErrorReason_SLOW_CONSUMER, map[string]string{"last_resource_version": "42"}), reason: pb.ErrorReason_SLOW_CONSUMER,
			want: "the watch fell behind informerd's history and was ended at resourceVersion 42: " + msg},
		{name: "message too large", err: status.Error(codes.ResourceExhausted, msg),
			want: "too large: " + msg},
		{name: "invalid", err: status.Error(codes.InvalidArgument, msg),
			want: "invalid request: " + msg},
		{name: "unauthenticated", err: status.Error(codes.Unauthenticated, msg),
			want: "not authenticated: " + msg + " (pass --token-file with a token for the audience informerd, or --cert-file and --key-file if informerd runs --auth-mode=mtls)"},
		{name: "permission denied", err: status.Error(codes.PermissionDenied, msg),
			want: "permission denied: " + msg},
		{name: "deadline", err: status.Error(codes.DeadlineExceeded, msg),
			want: "timed out: " + msg + " (raise --timeout, or check `informerctl status` for upstream trouble)"},
		{name: "internal", err: status.Error(codes.Internal, msg),
			want: "informerd failed (Internal): " + msg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ctl.Explain(tt.err, "addr")
			if diff := cmp.Diff(tt.want, got.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if r := client.ReasonOf(got); r != tt.reason {
				t.Errorf("the explained error's reason is %s, want %s kept", r, tt.reason)
			}
		})
	}
	if !errors.Is(ctl.Explain(context.Canceled, "addr"), context.Canceled) {
		t.Error("a canceled context is no longer context.Canceled")
	}
}

// TestEventError: what a watch says when RetryWatcher hands on an error
// event and ends.
func TestEventError(t *testing.T) {
	tests := []struct {
		name string
		obj  any
		want string
	}{
		{"410", &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "informerd: gone"},
			"resourceVersion too old: informerd: gone; list again (`informerctl get TYPE -o json` shows the list's resourceVersion) and watch from that"},
		{"403", &metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: "informerd: no"}, "informerd: no"},
		{"not a status", "x", "unexpected watch event x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ctl.EventError(tt.obj).Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestServedAs resolves TYPE as kubectl does, against what ListResources
// says.
func TestServedAs(t *testing.T) {
	served := []*pb.ResourceInfo{
		{Name: "pods", Version: "v1", Kind: "Pod"},
		{Name: "events", Version: "v1", Kind: "Event"},
		{Name: "events.events.k8s.io", Group: "events.k8s.io", Version: "v1", Kind: "Event"},
		{Name: "deployments.apps", Group: "apps", Version: "v1", Kind: "Deployment"},
		{Name: "widgets.example.com", Group: "example.com", Version: "v1", Kind: "Widget"},
		{Name: "gadgets.v1.example.com"}, // not resolved yet
	}
	tests := []struct {
		name, arg, want, err string
	}{
		{name: "core", arg: "pods", want: "pods"},
		{name: "canonical", arg: "deployments.apps", want: "deployments.apps"},
		{name: "plural of a group", arg: "deployments", want: "deployments.apps"},
		{name: "plural.version.group", arg: "widgets.v1.example.com", want: "widgets.example.com"},
		{name: "the exact name wins over a plural", arg: "events", want: "events"},
		{name: "wrong version", arg: "widgets.v2.example.com", err: `not found: informerd serves no resource "widgets.v2.example.com"; served: pods, events, events.events.k8s.io, deployments.apps, widgets.example.com, gadgets.v1.example.com (` + "`informerctl resources` lists them)"},
		{name: "not resolved", arg: "gadgets.v1.example.com", err: "not ready: gadgets.v1.example.com has not been found in the API server's discovery yet (`informerctl status` shows why)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ctl.Match(served, tt.arg)
			var got, gotErr string
			if err != nil {
				gotErr = err.Error()
			} else {
				got = r.GetName()
			}
			if diff := cmp.Diff([]string{tt.want, tt.err}, []string{got, gotErr}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	twice := append(served, &pb.ResourceInfo{Name: "deployments.example.com", Group: "example.com", Version: "v1", Kind: "Deployment"})
	if _, err := ctl.Match(twice, "deployments"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("deployments in two groups: %v, want ambiguous", err)
	}
}
