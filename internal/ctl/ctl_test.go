package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/informerd/informerd/internal/ctl"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
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
		{name: "no such resource", args: []string{"list", "widgets"}, want: []string{"not found:", "served: configmaps", "`informerctl resources` lists them"}},
		{name: "bad label selector", args: []string{"list", "configmaps", "-l", "a in ("}, want: []string{"invalid request:", "label_selector"}},
		{name: "unknown index", args: []string{"list", "configmaps", "--index", "node=n1"}, want: []string{"invalid request:", `index "node" does not exist`, "[namespace app]"}},
		{name: "malformed index flag", args: []string{"list", "configmaps", "--index", "app"}, want: []string{"NAME=VALUE"}},
		{name: "resourceVersion too old", args: []string{"watch", "configmaps", "--resource-version", "1"}, want: []string{"resourceVersion too old:", "list again"}},
		{name: "not a resourceVersion", args: []string{"watch", "configmaps", "--resource-version", "x"}, want: []string{"invalid request:", "resource version"}},
		{name: "not synced", args: []string{"--address", unsynced.Addr, "list", "gadgets.v1.example.com"}, want: []string{"not ready:", "has not synced", "informerctl status"}},
		{name: "waiting for a resourceVersion times out", args: []string{"--timeout", "1s", "list", "configmaps", "--min-resource-version", "999999999"}, want: []string{"timed out", "--timeout"}},
		{name: "unknown output", args: []string{"list", "configmaps", "-o", "wide"}, want: []string{`unknown output format "wide"`}},
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
		done <- ctl.Execute(ctx, []string{"--address", proxy.Addr(), "watch", "configmaps", "-n", ns, "-o", "json", "--max-events", "7", "--resume-backoff", "50ms"}, out, errOut)
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
		out, errOut, code := run(ctx, "status", "--metrics-address", srv.MetricsURL, "-o", "json")
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, errOut)
		}
		var rep struct {
			Ready     bool `json:"ready"`
			Resources []struct {
				Resource         string   `json:"resource"`
				Phase            string   `json:"phase"`
				Synced           bool     `json:"synced"`
				ResourceVersion  string   `json:"resourceVersion"`
				Objects          float64  `json:"objects"`
				StalenessSeconds *float64 `json:"stalenessSeconds"`
				Relists          float64  `json:"relists"`
				Watchers         float64  `json:"watchers"`
			} `json:"resources"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !rep.Ready || len(rep.Resources) != 1 {
			t.Fatalf("status %s", out)
		}
		r := rep.Resources[0]
		if r.Resource != "configmaps" || r.Phase != "Synced" || !r.Synced || r.ResourceVersion == "" || r.Objects != 3 || r.Relists < 1 || r.StalenessSeconds == nil {
			t.Errorf("configmaps: %+v", r)
		}
		out, _, code = run(ctx, "status", "--metrics-address", strings.TrimPrefix(srv.MetricsURL, "http://"))
		if code != 0 || !strings.Contains(out, "ready: every resource has synced") || !strings.HasPrefix(out, "RESOURCE ") {
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
	t.Run("not a metrics address", func(t *testing.T) {
		_, errOut, code := run(ctx, "status", "--metrics-address", "127.0.0.1:1")
		if code != 1 || !strings.Contains(errOut, "cannot reach informerd's metrics endpoint") {
			t.Errorf("exit status %d: %s", code, errOut)
		}
	})
}

// TestExplain covers the status codes a test cannot easily provoke from a
// real informerd here: each names its cause and what to do.
func TestExplain(t *testing.T) {
	withInfo := func(c codes.Code, reason string, meta map[string]string) error {
		st, err := status.New(c, "msg").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "informerd.io", Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"unauthenticated", status.Error(codes.Unauthenticated, "msg"), "not authenticated: msg (pass --token-file"},
		{"permission denied", status.Error(codes.PermissionDenied, "msg"), "permission denied: msg"},
		{"limit", withInfo(codes.ResourceExhausted, "LIMIT_EXCEEDED", map[string]string{"limit": "max-watches"}), "refused by informerd's limit --max-watches: msg"},
		{"slow consumer", withInfo(codes.ResourceExhausted, "SLOW_CONSUMER", map[string]string{"last_resource_version": "42"}), "ended at resourceVersion 42"},
		{"message too large", status.Error(codes.ResourceExhausted, "msg"), "too large: msg"},
		{"shutting down", withInfo(codes.Unavailable, "SHUTTING_DOWN", nil), "informerd is shutting down: msg"},
		{"continue token expired", withInfo(codes.OutOfRange, "CONTINUE_TOKEN_EXPIRED", nil), "run the list again"},
		{"internal", status.Error(codes.Internal, "msg"), "informerd failed (Internal): msg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ctl.Explain(tt.err, "addr"); !strings.Contains(got.Error(), tt.want) {
				t.Errorf("%q, want it to contain %q", got, tt.want)
			}
		})
	}
	if !errors.Is(ctl.Explain(context.Canceled, "addr"), context.Canceled) {
		t.Error("a canceled context is no longer context.Canceled")
	}
}
