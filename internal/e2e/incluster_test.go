package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

// inClusterScript mounts the pod's service account files where every
// client library's in-cluster loader reads them, in a mount namespace of
// the client's own (the test runs as root; nothing outside it changes),
// then runs the client unmodified.
const inClusterScript = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
cp "$SA_FILES"/* /run/secrets/kubernetes.io/serviceaccount/
exec "$@"`

// TestInClusterRedirect runs three unmodified in-cluster programs —
// client-go's rest.InClusterConfig, the Python client's
// load_incluster_config and client-node's loadFromCluster — with only what
// an injected pod spec gives them: KUBERNETES_SERVICE_HOST=127.0.0.1 and
// KUBERNETES_SERVICE_PORT set to informerd's Kubernetes API, and the
// service account folder holding the pod's token, its namespace and the CA
// informerd made for its loopback certificate (--kube-api-tls-self-signed).
// Each one's list is answered from informerd's cache and its write is
// forwarded with the pod's token.
func TestInClusterRedirect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts the service account folder in a mount namespace of its own: run it as root")
	}
	ns := "incluster"
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := clientToken(t, kube, ns)
	existing, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	shared := filepath.Join(dir, "shared") // the emptyDir informerd shares with the app
	c, err := config.Parse([]byte("resources: [{resource: configmaps, namespace: " + ns + "}]"))
	if err != nil {
		t.Fatal(err)
	}
	o := daemon.NewOptions()
	o.RestConfig, o.Config = env.Config, c
	o.GRPCAddress, o.MetricsAddress, o.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.KubeAPISelfSignedCA = filepath.Join(shared, "ca.crt")
	d, err := daemon.New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, d)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Caches().WaitSynced(sctx); err != nil {
		t.Fatal(err)
	}
	k := &kubeAPI{ns: ns, kube: kube, d: d}
	k.waitCached(t, "configmaps", existing.ResourceVersion)

	// The pod's service account folder, as the injected projected volume
	// fills it.
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(o.KubeAPISelfSignedCA)
	if err != nil {
		t.Fatalf("informerd published no CA at %s: %v", o.KubeAPISelfSignedCA, err)
	}
	for name, data := range map[string][]byte{"token": []byte(token), "namespace": []byte(ns), "ca.crt": ca} {
		testenv.WriteFile(t, sa, name, data)
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(d.KubeAPIURL(), "https://"))
	if err != nil {
		t.Fatal(err)
	}

	goBin := filepath.Join(dir, "incluster-go")
	if out, err := exec.Command("go", "build", "-o", goBin, "../../examples/kube-api/incluster-go").CombinedOutput(); err != nil {
		t.Fatalf("build the Go example: %v\n%s", err, out)
	}
	nodeDir, err := filepath.Abs("../../examples/kube-api/node")
	if err != nil {
		t.Fatal(err)
	}
	pyScript, err := filepath.Abs("../../examples/kube-api/python/incluster.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		argv []string
		cwd  string
	}{
		{"client-go InClusterConfig", []string{goBin, "from-go"}, ""},
		{"python load_incluster_config", []string{python, pyScript, "from-python"}, ""},
		{"client-node loadFromCluster", []string{"node", "incluster.mjs", "from-node"}, nodeDir},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := k.answered(t, "configmaps", "list")
			cmd := exec.Command("unshare", append([]string{"--mount", "--", "sh", "-c", inClusterScript, "sh"}, c.argv...)...)
			cmd.Dir = c.cwd
			cmd.Env = append(withoutPythonEnv(os.Environ()), "SA_FILES="+sa, "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+port, "PYTHONDONTWRITEBYTECODE=1")
			out, err := cmd.Output()
			if err != nil {
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("%v: %v\n%s", c.argv, err, stderr)
			}
			var got struct {
				Host    string
				Listed  []string
				Created string
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if !strings.Contains(got.Host, "127.0.0.1:"+port) {
				t.Errorf("the client's server is %s, want informerd's %s", got.Host, d.KubeAPIURL())
			}
			if !slices.Contains(got.Listed, "existing") {
				t.Errorf("the client listed %v, want existing among them", got.Listed)
			}
			if after := k.answered(t, "configmaps", "list"); after <= before {
				t.Errorf("informerd answered %v lists of configmaps before the client and %v after: the list did not come from its cache", before, after)
			}
			if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, got.Created, metav1.GetOptions{}); err != nil {
				t.Errorf("the client's write (forwarded with the pod's token) is not at the API server: %v", err)
			}
		})
	}
}
