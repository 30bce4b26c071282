package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/testenv"
)

// kubeAPI is a real informerd (internal/daemon, in this process) serving
// the Kubernetes API over TLS on loopback with --auth-mode none, next to the
// real API server, for clients that no one here wrote. Both kubeconfigs
// carry the same ServiceAccount token and default to the namespace ns: the
// API server checks it on every request, informerd passes it on with the
// requests it forwards. TLS, because client-go (kubectl) sends a
// kubeconfig's credentials only to an https server.
type kubeAPI struct {
	ns   string
	kube *kubernetes.Clientset // the API server, as its administrator
	// direct and cached are the kubeconfig files of the API server and of
	// informerd.
	direct, cached string
	d              *daemon.Daemon
	// kubectlCache is kubectl's discovery cache (kept per server).
	kubectlCache string
}

// kubeAPIConfig caches the configmaps of one namespace, as a sidecar
// would, and pods by node in every namespace.
const kubeAPIConfig = `
resources:
  - resource: configmaps
    namespace: %s
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
`

// startKubeAPI creates namespace ns with a ServiceAccount that may read
// and write configmaps and pods there, and runs informerd (kubeAPIConfig)
// until the test ends.
func startKubeAPI(t *testing.T, ns string) *kubeAPI {
	t.Helper()
	return startKubeAPIConfig(t, ns, fmt.Sprintf(kubeAPIConfig, ns))
}

// startKubeAPIConfig is startKubeAPI with the configuration yaml, the
// client also reading what read allows everywhere.
func startKubeAPIConfig(t *testing.T, ns, yaml string, read ...rbacv1.PolicyRule) *kubeAPI {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := clientToken(t, kube, ns, read...)

	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := testenv.NewCA(t, "kube-api-ca")
	cert, key := ca.Issue(t, "127.0.0.1", true)
	o := daemon.NewOptions()
	o.RestConfig, o.Config = env.Config, c
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	d, err := daemon.New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, d)
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := d.Caches().WaitSynced(sctx); err != nil {
		t.Fatalf("informerd's caches did not sync: %v", err)
	}

	return &kubeAPI{
		ns: ns, kube: kube, d: d, kubectlCache: filepath.Join(dir, "kubectl-cache"),
		direct: writeKubeconfig(t, filepath.Join(dir, "direct"), env.Config.Host, env.Config.CAData, token, ns),
		cached: writeKubeconfig(t, filepath.Join(dir, "informerd"), d.KubeAPIURL(), ca.PEM, token, ns),
	}
}

// clientToken creates the ServiceAccount "client" in ns, lets it write
// configmaps and pods there and read them (and events, for kubectl
// describe) everywhere, and returns a token of it for the API server's
// audience.
func clientToken(t *testing.T, kube *kubernetes.Clientset, ns string, read ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "client", Namespace: ns}}
	resources := []string{"configmaps", "pods"}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "client"},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "client-" + ns},
		Rules:      append([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: append(resources, "events"), Verbs: []string{"get", "list", "watch"}}}, read...),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "client-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "client-" + ns},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "client", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// writeKubeconfig writes a kubeconfig for server with a bearer token and
// a default namespace, and returns its path.
func writeKubeconfig(t *testing.T, path, server string, ca []byte, token, ns string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: ns}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitCached waits until informerd's cache of resource has reached rv, so
// that a read through informerd is compared with the API server's at the
// same point.
func (k *kubeAPI) waitCached(t *testing.T, resource, rv string) {
	t.Helper()
	p, ok := k.d.Caches().Lookup(resource)
	if !ok {
		t.Fatalf("informerd caches no %s", resource)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Cache().WaitFor(ctx, rv); err != nil {
		t.Fatalf("informerd's cache of %s did not reach resourceVersion %s: %v", resource, rv, err)
	}
}

// waitGone waits until informerd's cache of resource no longer holds the
// object name in its namespace: the deletion's resourceVersion is in no answer a
// client gets.
func (k *kubeAPI) waitGone(t *testing.T, resource, name string) {
	t.Helper()
	p, ok := k.d.Caches().Lookup(resource)
	if !ok {
		t.Fatalf("informerd caches no %s", resource)
	}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("informerd's cache to lose %s %s/%s", resource, k.ns, name), func() bool {
		_, ok := p.Cache().Get(object.KeyOf(k.ns, name))
		return !ok
	})
}

// answered returns how many requests for resource with verb informerd
// answered itself, from its cache, with a 200: from its metrics. A client
// that saw the same through informerd as directly was served by informerd
// only if these grew.
func (k *kubeAPI) answered(t *testing.T, resource, verb string) int {
	t.Helper()
	resp, err := http.Get(k.d.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	series := fmt.Sprintf(`informerd_kube_api_requests_total{code="200",resource=%q,verb=%q} `, resource, verb)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	return 0
}

// servedReads fails the test unless informerd answers at least one
// request of each verb for resource from its cache. A watch counts once it
// has ended, which informerd may notice after its client has.
func (k *kubeAPI) servedReads(t *testing.T, resource string, verbs ...string) {
	t.Helper()
	for _, verb := range verbs {
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("informerd to count a %s of %s it answered from its cache", verb, resource), func() bool {
			return k.answered(t, resource, verb) > 0
		})
	}
}

// output is a running client's standard output, value by value: each JSON
// value it prints, or each line.
type output struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	values chan []byte // closed when stdout ends
}

// startOutput starts cmd and reads its standard output as JSON values
// (jsonValues) or as lines.
func startOutput(t *testing.T, cmd *exec.Cmd, jsonValues bool) *output {
	t.Helper()
	o := &output{cmd: cmd, values: make(chan []byte, 100)}
	cmd.Stderr = &o.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(o.values)
		if jsonValues {
			dec := json.NewDecoder(stdout)
			for {
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return
				}
				o.values <- v
			}
		}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			o.values <- bytes.Clone(sc.Bytes())
		}
	}()
	return o
}

// next returns the next n values; it fails the test when the client ends
// first, or prints nothing for a minute (it hangs).
func (o *output) next(t *testing.T, n int) [][]byte {
	t.Helper()
	var vs [][]byte
	for len(vs) < n {
		select {
		case v, ok := <-o.values:
			if !ok {
				err := o.cmd.Wait()
				t.Fatalf("%s ended (%v) after %d of %d values:\n%s\nstderr:\n%s", o.cmd.Args[0], err, len(vs), n, bytes.Join(vs, []byte("\n")), o.stderr.String())
			}
			vs = append(vs, v)
		case <-time.After(time.Minute):
			t.Fatalf("%s printed %d of %d values in a minute:\n%s\nstderr:\n%s", o.cmd.Args[0], len(vs), n, bytes.Join(vs, []byte("\n")), o.stderr.String())
		}
	}
	return vs
}

// end waits for a client that ends by itself and fails the test when it
// failed or printed more.
func (o *output) end(t *testing.T) {
	t.Helper()
	for v := range o.values {
		t.Errorf("%s printed more than expected: %s", o.cmd.Args[0], v)
	}
	if err := o.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", o.cmd.Args[0], err, o.stderr.String())
	}
}

// stop ends a client that does not end by itself (kubectl get -w).
func (o *output) stop() {
	_ = o.cmd.Process.Kill()
	for range o.values {
	}
	_ = o.cmd.Wait()
}

// clientLine is a line that examples/kube-api's clients print.
type clientLine struct {
	Step            string     `json:"step"`
	Type            string     `json:"type,omitempty"`
	Name            string     `json:"name,omitempty"`
	ResourceVersion string     `json:"resourceVersion,omitempty"`
	Names           []string   `json:"names,omitempty"`
	Items           [][]string `json:"items,omitempty"`
}

func parseLines(t *testing.T, vs [][]byte) []clientLine {
	t.Helper()
	out := make([]clientLine, 0, len(vs))
	for _, v := range vs {
		var l clientLine
		if err := json.Unmarshal(v, &l); err != nil {
			t.Fatalf("client printed %s: %v", v, err)
		}
		out = append(out, l)
	}
	return out
}

// twinRun runs one client program twice at once, against the API server
// and through informerd (cmdFor builds its command for a kubeconfig). Once
// each has printed ready lines, write makes changes; each must then print
// more lines and end. It returns what each printed, the API server's first.
func twinRun(t *testing.T, k *kubeAPI, cmdFor func(ctx context.Context, kubeconfig string) *exec.Cmd, ready, more int, write func()) (direct, cached []clientLine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	outs := []*output{startOutput(t, cmdFor(ctx, k.direct), true), startOutput(t, cmdFor(ctx, k.cached), true)}
	var got [2][][]byte
	for i, o := range outs {
		got[i] = o.next(t, ready)
	}
	write()
	for i, o := range outs {
		got[i] = append(got[i], o.next(t, more)...)
		o.end(t)
	}
	return parseLines(t, got[0]), parseLines(t, got[1])
}

// sameAsDirect fails the test when a client saw something else through
// informerd than from the API server.
func sameAsDirect[T any](t *testing.T, what string, direct, cached T) {
	t.Helper()
	if diff := cmp.Diff(direct, cached); diff != "" {
		t.Errorf("%s (-API server +informerd):\n%s", what, diff)
	}
}

// change is one write: the object's name and the resourceVersion it left.
type change struct{ name, rv string }

// configMapWrites makes four changes to the ConfigMaps of ns, which holds
// "a" and "b": create c, update a, delete b, create d.
func configMapWrites(t *testing.T, kube *kubernetes.Clientset, ns string) []change {
	t.Helper()
	ctx := context.Background()
	cms := kube.CoreV1().ConfigMaps(ns)
	must := func(cm *corev1.ConfigMap, err error) change {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return change{cm.Name, cm.ResourceVersion}
	}
	c := must(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}))
	a := must(cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}))
	// The deletion's resourceVersion is only in its DELETED event.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: a.rv, FieldSelector: "metadata.name=b"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := change{name: "b"}
	for b.rv == "" {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Deleted {
				b.rv = cm.ResourceVersion
			}
		case <-time.After(time.Minute):
			t.Fatal("no DELETED event from the API server in a minute")
		}
	}
	d := must(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{}))
	return []change{c, a, b, d}
}

// twoConfigMaps creates "a" and "b" in ns and waits until informerd has
// them.
func (k *kubeAPI) twoConfigMaps(t *testing.T) {
	t.Helper()
	var rv string
	for _, name := range []string{"a", "b"} {
		cm, err := k.kube.CoreV1().ConfigMaps(k.ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv = cm.ResourceVersion
	}
	k.waitCached(t, "configmaps", rv)
}
