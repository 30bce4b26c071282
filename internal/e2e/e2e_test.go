// Package e2e runs the example clients in other languages against a real
// informerd (caches + CacheService on loopback TCP) on the real control
// plane, and checks what they receive; and clients that no one here wrote
// (kubectl, the Python kubernetes package, @kubernetes/client-node) against
// informerd's Kubernetes API and the API server at once, for the same
// writes, and checks that they see the same.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/testserver"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// line is one line an example client prints.
type line struct {
	Step            string   `json:"step"`
	Names           []string `json:"names,omitempty"`
	Name            string   `json:"name,omitempty"`
	Kind            string   `json:"kind,omitempty"`
	Type            string   `json:"type,omitempty"`
	ResourceVersion string   `json:"resourceVersion,omitempty"`
	// Object is the object as a field mask shows it, printed when the
	// client was given one.
	Object map[string]any `json:"object,omitempty"`
}

// command builds the command line of an example client: it lists resource
// in namespace from the informerd at addr, gets the first object, and
// watches for events changes, dropping its stream after RESUME_AFTER (in
// its environment) and resuming from the last resourceVersion. With sec
// it uses TLS and a bearer token; with fields (comma-separated paths) it
// asks for only those fields of each object.
type command func(ctx context.Context, addr, resource, namespace string, events int, sec *security, fields string) *exec.Cmd

// security is what a client needs for TLS and a bearer token.
type security struct {
	CAFile, TokenFile string
}

// token is the bearer token informerd accepts when secure.
const token = "e2e-token"

// staticToken accepts only "authorization: Bearer <token>".
type staticToken struct{}

func (staticToken) Authenticate(ctx context.Context) (user.Info, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+token {
		return nil, &auth.Error{Kind: auth.Unauthenticated, Msg: fmt.Sprintf("want the test's bearer token, got %q", got)}
	}
	return &user.DefaultInfo{Name: "e2e"}, nil
}

// serveSecurely returns options that serve TLS with a certificate of a new
// CA and require the test's token, and the files a client needs.
func serveSecurely(t *testing.T) (testserver.Options, *security) {
	t.Helper()
	dir := t.TempDir()
	ca := testenv.NewCA(t, "e2e-ca")
	certPEM, keyPEM := ca.Issue(t, "informerd", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	opts := testserver.Options{
		Creds:  credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		Server: server.Options{Authenticator: staticToken{}},
	}
	return opts, &security{CAFile: testenv.WriteFile(t, dir, "ca.crt", ca.PEM), TokenFile: testenv.WriteFile(t, dir, "token", []byte(token+"\n"))}
}

// runExample runs an example client against a real informerd serving the
// configmaps of ns, which holds "a" and "b"; when secure, over TLS with a
// bearer token. Once the client has printed
// its get step it is about to watch from its list's resourceVersion; the
// test then makes six changes, some before the client is connected. The
// client must list a and b, get a ConfigMap, resume once, and receive
// every change exactly once, in order, with its resourceVersion.
func runExample(t *testing.T, ns string, secure bool, cmdFor command) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, name := range []string{"a", "b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var opts testserver.Options
	var sec *security
	if secure {
		opts, sec = serveSecurely(t)
	}
	srv := testserver.Start(t, env.Config, fmt.Sprintf("resources: [{resource: configmaps, namespace: %s}]", ns), opts)
	p, _ := srv.Set().Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "the cache to hold the two configmaps", func() bool {
		return p.Cache().Stats().Objects == 2
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	const events = 6
	cmd := cmdFor(wctx, srv.Addr, "configmaps", ns, events, sec, "")
	cmd.Env = append(cmd.Environ(), "RESUME_AFTER=3")
	var want []line
	got := runClient(t, cmd, func() {
		// The client is about to watch from its list's RV; change
		// things now, so some changes happen before it is connected.
		for i := range 3 {
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, line{Step: "event", Type: "ADDED", Name: cm.Name, Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
		}
		cm, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"k": "v"}
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, line{Step: "event", Type: "MODIFIED", Name: "a", Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
		for i := 3; i < 5; i++ {
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", i)}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, line{Step: "event", Type: "ADDED", Name: cm.Name, Kind: "ConfigMap", ResourceVersion: cm.ResourceVersion})
		}
	})
	if len(got) < 2 || got[0].Step != "list" || !cmp.Equal(got[0].Names, []string{"a", "b"}) || got[1].Step != "get" || got[1].Kind != "ConfigMap" {
		t.Fatalf("list/get lines = %+v", got)
	}
	evs := watched(t, got[2:])
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events the client received (-want +got):\n%s", diff)
	}
}

// runClient runs an example client's cmd, calls onGet once it has printed
// its get step (it is then about to watch), and returns the lines it
// printed.
func runClient(t *testing.T, cmd *exec.Cmd, onGet func()) []line {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []line
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("client printed %q: %v", sc.Text(), err)
		}
		got = append(got, l)
		if l.Step == "get" {
			onGet()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	return got
}

// watched returns the event lines of a client's watch, failing the test
// if it never resumed.
func watched(t *testing.T, lines []line) []line {
	t.Helper()
	var evs []line
	resumed := false
	for _, l := range lines {
		switch l.Step {
		case "event":
			evs = append(evs, l)
		case "resume":
			resumed = true
		}
	}
	if !resumed {
		t.Error("the client never resumed its watch")
	}
	return evs
}
