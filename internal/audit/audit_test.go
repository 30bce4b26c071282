package audit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/informerd/informerd/internal/audit"
)

// configMapsOnly audits reads of ConfigMaps at level Metadata, once, when
// the response is complete, and nothing else.
const configMapsOnly = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [configmaps]
- level: None
`

// lumberjackMill is the goroutine lumberjack starts at its first write and
// never stops (it removes and compresses rotated files).
var lumberjackMill = goleak.IgnoreAnyFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun")

func checkLeaks(t *testing.T, opts ...goleak.Option) {
	opts = append(opts, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	good := writeFile(t, "policy.yaml", configMapsOnly)
	logPath := filepath.Join(t.TempDir(), "audit.log")
	enabled := func(o *audit.Options) { o.PolicyFile, o.LogPath = good, logPath }
	for _, tc := range []struct {
		name    string
		set     func(*audit.Options)
		wantErr string // "" for none
	}{
		{name: "defaults, off", set: func(*audit.Options) {}},
		{name: "good", set: enabled},
		{name: "stdout", set: func(o *audit.Options) { enabled(o); o.LogPath = "-" }},
		{name: "batch, legacy, no rotation", set: func(o *audit.Options) {
			enabled(o)
			o.Mode, o.Format, o.MaxSize = audit.ModeBatch, "legacy", 0
		}},
		{
			name:    "bad format",
			set:     func(o *audit.Options) { enabled(o); o.Format = "yaml" },
			wantErr: `--audit-log-format must be one of legacy, json, got "yaml"`,
		},
		{
			name:    "bad mode",
			set:     func(o *audit.Options) { enabled(o); o.Mode = "async" },
			wantErr: `--audit-log-mode must be one of batch, blocking, blocking-strict, got "async"`,
		},
		{
			name:    "negative maxsize",
			set:     func(o *audit.Options) { enabled(o); o.MaxSize = -1 },
			wantErr: "--audit-log-maxsize must not be negative, got -1",
		},
		{
			name:    "negative maxbackup",
			set:     func(o *audit.Options) { enabled(o); o.MaxBackups = -2 },
			wantErr: "--audit-log-maxbackup must not be negative",
		},
		{
			name:    "truncate event larger than batch",
			set:     func(o *audit.Options) { enabled(o); o.Truncate, o.TruncateMaxBatchSize = true, 10 },
			wantErr: "--audit-log-truncate-max-batch-size 10 must be at least --audit-log-truncate-max-event-size 102400",
		},
		{
			name:    "policy without path",
			set:     func(o *audit.Options) { o.PolicyFile = good },
			wantErr: "--audit-policy-file needs --audit-log-path",
		},
		{
			name:    "path without policy",
			set:     func(o *audit.Options) { o.LogPath = logPath },
			wantErr: "--audit-log-path needs --audit-policy-file",
		},
		{
			name:    "missing policy file",
			set:     func(o *audit.Options) { enabled(o); o.PolicyFile = filepath.Join(t.TempDir(), "nope.yaml") },
			wantErr: "nope.yaml: no such file or directory",
		},
		{
			name: "malformed policy",
			set: func(o *audit.Options) {
				enabled(o)
				o.PolicyFile = writeFile(t, "bad.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
			},
			wantErr: `bad.yaml: rules[0].level: Unsupported value: "Loud"`,
		},
		{
			name: "not YAML",
			set: func(o *audit.Options) {
				enabled(o)
				o.PolicyFile = writeFile(t, "junk.yaml", "{rules: [")
			},
			wantErr: "junk.yaml: failed decoding",
		},
		{
			name: "no rules",
			set: func(o *audit.Options) {
				enabled(o)
				o.PolicyFile = writeFile(t, "empty.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\n")
			},
			wantErr: "empty.yaml: loaded illegal policy with 0 rules",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := audit.NewOptions()
			tc.set(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.wantErr)
			}
			// New checks as Validate does.
			a, err2 := audit.New(o)
			if (err == nil) != (err2 == nil) {
				t.Fatalf("Validate() = %v but New() = %v", err, err2)
			}
			if a != nil {
				_ = a.Run(canceled(t))
			}
		})
	}
}

// TestDefaultsAreKubeAPIServers: the flags and their defaults are
// kube-apiserver's (k8s.io/apiserver/pkg/server/options.NewAuditOptions).
func TestDefaultsAreKubeAPIServers(t *testing.T) {
	o := audit.NewOptions()
	fs := flag.NewFlagSet("informerd", flag.ContinueOnError)
	o.AddFlags(fs)
	got := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { got[f.Name] = f.DefValue })
	want := map[string]string{
		"audit-policy-file":                 "",
		"audit-log-path":                    "",
		"audit-log-maxage":                  "366",
		"audit-log-maxbackup":               "100",
		"audit-log-maxsize":                 "100",
		"audit-log-compress":                "false",
		"audit-log-format":                  "json",
		"audit-log-mode":                    "blocking",
		"audit-log-truncate-enabled":        "false",
		"audit-log-truncate-max-event-size": "102400",
		"audit-log-truncate-max-batch-size": "10485760",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags and defaults (-want +got):\n%s", diff)
	}
	if o.Enabled() {
		t.Error("Enabled() = true by default")
	}
	if a, err := audit.New(o); a != nil || err != nil {
		t.Errorf("New(defaults) = %v, %v; want nil, nil", a, err)
	}
}

// TestLogsWhatThePolicySelects runs requests through the API server's
// audit filters with informerd's Auditor: the log holds exactly the
// events kube-apiserver would write.
func TestLogsWhatThePolicySelects(t *testing.T) {
	checkLeaks(t, lumberjackMill)
	o := audit.NewOptions()
	o.PolicyFile = writeFile(t, "policy.yaml", configMapsOnly)
	o.LogPath = filepath.Join(t.TempDir(), "logs", "audit.log")
	a, err := audit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, a)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev", user.AllAuthenticated}}
	ok := get(a, "/api/v1/namespaces/ns1/configmaps/cm1", alice)
	missing := get(a, "/api/v1/namespaces/ns1/configmaps/missing", alice)
	get(a, "/api/v1/namespaces/ns1/secrets/s1", alice) // level None
	stop()

	info, err := os.Stat(o.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("log file mode = %v, want 0600", got)
	}
	event := func(rec *httptest.ResponseRecorder, name string, code int32) auditv1.Event {
		return auditv1.Event{
			TypeMeta:   metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
			Level:      auditv1.LevelMetadata,
			AuditID:    types.UID(rec.Header().Get("Audit-Id")),
			Stage:      auditv1.StageResponseComplete,
			RequestURI: "/api/v1/namespaces/ns1/configmaps/" + name,
			Verb:       "get",
			User:       authnv1.UserInfo{Username: "alice", Groups: []string{"dev", user.AllAuthenticated}},
			SourceIPs:  []string{"192.0.2.1"},
			UserAgent:  "audit-test",
			ObjectRef: &auditv1.ObjectReference{
				Resource: "configmaps", Namespace: "ns1", Name: name, APIVersion: "v1",
			},
			ResponseStatus: &metav1.Status{Code: code},
		}
	}
	want := []auditv1.Event{event(ok, "cm1", http.StatusOK), event(missing, "missing", http.StatusNotFound)}
	// An event after Run returned is refused: the file stays closed.
	get(a, "/api/v1/namespaces/ns1/configmaps/late", alice)
	got := readEvents(t, o.LogPath)
	if diff := cmp.Diff(want, got, ignoreTimes); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	for _, ev := range got {
		if ev.AuditID == "" || ev.RequestReceivedTimestamp.IsZero() || ev.StageTimestamp.Before(&ev.RequestReceivedTimestamp) {
			t.Errorf("event %s: audit ID %q, received %v, stage %v", ev.RequestURI, ev.AuditID, ev.RequestReceivedTimestamp, ev.StageTimestamp)
		}
	}
}

// TestBatchModeFlushesOnStop: in batch mode events wait in the buffer, and
// Run writes them all before it returns.
func TestBatchModeFlushesOnStop(t *testing.T) {
	checkLeaks(t, lumberjackMill)
	o := audit.NewOptions()
	o.PolicyFile = writeFile(t, "policy.yaml", configMapsOnly)
	o.LogPath = filepath.Join(t.TempDir(), "audit.log")
	o.Mode = audit.ModeBatch
	a, err := audit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	alice := &user.DefaultInfo{Name: "alice"}
	for range n {
		get(a, "/api/v1/namespaces/ns1/configmaps/cm1", alice)
	}
	// Nothing drains the buffer before Run.
	if got := readEvents(t, o.LogPath); len(got) != 0 {
		t.Fatalf("%d events written before Run, want them buffered", len(got))
	}
	if err := a.Run(canceled(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(readEvents(t, o.LogPath)); got != n {
		t.Errorf("after Run returned the log holds %d events, want %d", got, n)
	}
	// A late event is refused, and does not reopen the file.
	get(a, "/api/v1/namespaces/ns1/configmaps/late", alice)
	if got := len(readEvents(t, o.LogPath)); got != n {
		t.Errorf("after a late event the log holds %d events, want %d", got, n)
	}
}

// TestRotation: past --audit-log-maxsize the log is rotated to a backup
// named with a timestamp, as lumberjack does for kube-apiserver, and no
// event is lost.
func TestRotation(t *testing.T) {
	checkLeaks(t, lumberjackMill)
	dir := t.TempDir()
	o := audit.NewOptions()
	o.PolicyFile = writeFile(t, "policy.yaml", configMapsOnly)
	o.LogPath = filepath.Join(dir, "audit.log")
	o.MaxSize = 1 // MB
	a, err := audit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, a)
	// Each event carries its 8 KiB request URI: 200 of them pass 1 MB.
	const n = 200
	uri := "/api/v1/namespaces/ns1/configmaps?padding=" + strings.Repeat("x", 8<<10)
	alice := &user.DefaultInfo{Name: "alice"}
	for range n {
		get(a, uri, alice)
	}
	stop()

	backups, err := filepath.Glob(filepath.Join(dir, "audit-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(backups) == 0 {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("no rotated audit-<timestamp>.log in %s: %v", dir, entries)
	}
	total := len(readEvents(t, o.LogPath))
	for _, b := range backups {
		total += len(readEvents(t, b))
	}
	if total != n {
		t.Errorf("%d events in the log and %d backups, want %d", total, len(backups), n)
	}
}

var ignoreTimes = cmpopts.IgnoreFields(auditv1.Event{}, "RequestReceivedTimestamp", "StageTimestamp", "Annotations")

// get sends a GET for uri as u through the API server's audit filters,
// with the request's facts set as the filters before them in
// kube-apiserver's chain would, to a handler that answers 404 for objects
// named "missing".
func get(a *audit.Auditor, uri string, u user.Info) *httptest.ResponseRecorder {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path.Base(r.URL.Path) == "missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("{}"))
	})
	h = filters.WithAudit(h, a.Sink(), a.Policy(), nil)
	facts := requestFacts(h, u)
	h = filters.WithAuditInit(facts)

	req := httptest.NewRequest(http.MethodGet, uri, nil) // from 192.0.2.1
	req.Header.Set("User-Agent", "audit-test")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// requestFacts sets what kube-apiserver's WithRequestInfo and
// WithAuthentication would.
func requestFacts(next http.Handler, u user.Info) http.Handler {
	infos := &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := infos.NewRequestInfo(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := request.WithUser(request.WithRequestInfo(r.Context(), info), u)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// start runs a until the returned function is called, which returns once
// Run did.
func start(t *testing.T, a *audit.Auditor) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}
}

func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// readEvents parses a JSON-lines audit log.
func readEvents(t *testing.T, p string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []auditv1.Event
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatalf("%s: line %d: %v", p, len(events)+1, err)
		}
		events = append(events, ev)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
