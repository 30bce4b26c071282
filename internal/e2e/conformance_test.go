package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

// conformanceEnv names the environment variable that points TestConformance
// at the e2e.test binary hack/conformance/build.sh builds (an absolute path:
// go test runs in the package's folder). Its results go to the binary's
// folder. conformanceFocusEnv, when set, replaces
// conformanceFocus, to run again one spec that failed.
const (
	conformanceEnv      = "INFORMERD_CONFORMANCE_E2E"
	conformanceFocusEnv = "INFORMERD_CONFORMANCE_FOCUS"
)

// conformanceFocus and conformanceSkip select the API-machinery specs that
// need no kubelet and no kube-controller-manager: the control plane has
// neither, so no pod starts, no namespace is ever emptied, no ServiceAccount
// is made and no quota is counted. CustomResourceFieldSelectors is left
// out: it deploys a conversion webhook as a pod.
const (
	conformanceFocus = `\[sig-api-machinery\] (` +
		`Watchers|` +
		`Servers with support for API chunking|` +
		`Servers with support for Table transformation|` +
		`client-go should negotiate|` +
		`API Streaming \(aka\. WatchList\)|` +
		`CustomResourceDefinition Watch|` +
		`CustomResourceDefinition resources|` +
		`CustomResourceValidationRules|` +
		`Discovery|` +
		`AggregatedDiscovery|` +
		`FieldValidation|` +
		`ServerSideApply|` +
		`Server request timeout|` +
		`server version|` +
		`Namespaces should (patch|apply)` +
		`)`
	conformanceSkip = `\[Disruptive\]|\[Flaky\]|\[Feature:|\[Alpha\]|OffByDefault`
)

// conformanceConfig caches the resources the selected specs and the e2e
// framework read, with informerd's default settings otherwise. Custom
// resources are not cached: each spec makes a CRD of its own.
const conformanceConfig = `
resources:
  - resource: configmaps
  - resource: secrets
  - resource: pods
  - resource: podtemplates
  - resource: services
  - resource: serviceaccounts
  - resource: events
  - resource: namespaces
  - resource: nodes
  - resource: customresourcedefinitions.apiextensions.k8s.io
  - resource: apiservices.apiregistration.k8s.io
`

// TestConformance runs Kubernetes' own API-machinery e2e specs (make
// conformance) twice, against kube-apiserver and through informerd's
// Kubernetes API on TLS, as the same ServiceAccount bound to cluster-admin;
// writes report.md next to the binary, a table of each spec's result in
// both runs; and fails when a spec that passes against kube-apiserver does
// not pass through informerd.
func TestConformance(t *testing.T) {
	bin := os.Getenv(conformanceEnv)
	if bin == "" {
		t.Skipf("set %s to the e2e.test that hack/conformance/build.sh builds (make conformance)", conformanceEnv)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Dir(bin)
	focus := conformanceFocus
	if f := os.Getenv(conformanceFocusEnv); f != "" {
		focus = f
	}
	ctx := conformanceContext(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	token := conformanceToken(t, kube)
	conformanceNode(t, kube)
	cachedURL, ca := startConformanceInformerd(t, filepath.Join(out, "informerd.log"))
	tmp := t.TempDir()
	targets := []struct{ name, server string }{
		{"direct", env.Config.Host},
		{"informerd", cachedURL},
	}
	var runs []conformanceRun
	for _, target := range targets {
		cas := env.Config.CAData
		if target.name == "informerd" {
			cas = ca
		}
		kubeconfig := writeKubeconfig(t, filepath.Join(tmp, target.name+".kubeconfig"), target.server, cas, token, "default")
		r := runConformance(ctx, t, bin, target.name, kubeconfig, focus, out)
		runs = append(runs, r)
		if ctx.Err() != nil {
			t.Fatalf("stopped: %v", context.Cause(ctx))
		}
	}
	report := conformanceReport(focus, runs[0], runs[1])
	path := filepath.Join(out, "report.md")
	if err := os.WriteFile(path, []byte(report.markdown()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %s", path)
	for _, row := range report.regressions() {
		t.Errorf("passes against kube-apiserver, %s through informerd: %s\n%s", row.informerd.result, row.name, firstLines(row.informerd.message, 6))
	}
}

// conformanceContext ends when the process is interrupted or three minutes
// before the test's deadline, so that e2e.test, informerd, kube-apiserver
// and etcd are stopped by the test rather than left behind by a panic.
func conformanceContext(t *testing.T) context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	t.Cleanup(stop)
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, deadline.Add(-3*time.Minute), fmt.Errorf("the test's -timeout is near"))
		t.Cleanup(cancel)
	}
	return ctx
}

// conformanceToken creates the ServiceAccount default/conformance bound to
// cluster-admin and returns a token of it for the API server's audience,
// valid for a day: the e2e specs create CRDs, namespaces and cluster-wide
// policies.
func conformanceToken(t *testing.T, kube *kubernetes.Clientset) string {
	t.Helper()
	ctx := context.Background()
	const ns, name = "default", "conformance"
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	day := int64(24 * 60 * 60)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// conformanceNode creates a Node object, which no kubelet backs, for the
// spec that prints the cluster's nodes as a Table and wants a row.
func conformanceNode(t *testing.T, kube *kubernetes.Clientset) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "conformance-node"}}
	if _, err := kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startConformanceInformerd runs informerd (conformanceConfig, default
// options) with its Kubernetes API on TLS until the test ends, logging to
// logPath, and returns the API's URL and the CA that issued its
// certificate.
func startConformanceInformerd(t *testing.T, logPath string) (url string, ca []byte) {
	t.Helper()
	c, err := config.Parse([]byte(conformanceConfig))
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	dir := t.TempDir()
	authority := testenv.NewCA(t, "conformance-ca")
	cert, key := authority.Issue(t, "127.0.0.1", true)
	o := daemon.NewOptions()
	o.RestConfig, o.Config = env.Config, c
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.TLS.CertFile = testenv.WriteFile(t, dir, "tls.crt", cert)
	o.TLS.KeyFile = testenv.WriteFile(t, dir, "tls.key", key)
	d, err := daemon.New(o, slog.New(slog.NewTextHandler(logFile, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Caches().WaitSynced(ctx); err != nil {
		t.Fatalf("informerd's caches did not sync: %v", err)
	}
	return d.KubeAPIURL(), authority.PEM
}

// conformanceRun is one run of e2e.test and its JUnit report.
type conformanceRun struct {
	name     string
	duration time.Duration
	specs    map[string]specResult
}

// runConformance runs e2e.test with the specs focus selects (less
// conformanceSkip) against the cluster of kubeconfig, its output in
// <out>/e2e-<name>.log and its JUnit report in
// <out>/junit-<name>.xml, and logs each spec as it ends. The binary dies
// with this process; when ctx ends it is interrupted, and killed 30 seconds
// later.
func runConformance(ctx context.Context, t *testing.T, bin, name, kubeconfig, focus, out string) conformanceRun {
	t.Helper()
	junit := filepath.Join(out, "junit-"+name+".xml")
	_ = os.Remove(junit)
	logFile, err := os.Create(filepath.Join(out, "e2e-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	controlplane, err := testenv.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin,
		"--kubeconfig="+kubeconfig,
		"--provider=skeleton",
		"--kubectl-path="+filepath.Join(controlplane, "kubectl"),
		// No nodes, no system pods, no ServiceAccount controller.
		"--allowed-not-ready-nodes=-1", "--minStartupPods=-1", "--e2e-verify-service-account=false",
		"--ginkgo.focus="+focus,
		"--ginkgo.skip="+conformanceSkip,
		"--ginkgo.junit-report="+junit,
		"--ginkgo.timeout=90m",
		"--ginkgo.v", "--ginkgo.no-color", "--ginkgo.silence-skips",
	)
	cmd.Dir = out
	progress := &specProgress{run: name, logf: t.Logf}
	cmd.Stdout = io.MultiWriter(logFile, progress)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	t.Logf("%s: running %s (output in %s)", name, filepath.Base(bin), logFile.Name())
	start := time.Now()
	err = cmd.Run()
	progress.flush()
	r := conformanceRun{name: name, duration: time.Since(start).Round(time.Second)}
	t.Logf("%s: e2e.test ended after %s: %v", name, r.duration, err)
	if r.specs, err = readJUnit(junit); err != nil {
		t.Fatalf("%s: %v (see %s)", name, err, logFile.Name())
	}
	return r
}
