package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonKubernetesClient runs examples/kube-api/python/watch.py, the
// Kubernetes Python client (Debian's python3-kubernetes) unmodified, against
// the API server and through informerd at once: list_namespaced_config_map,
// then watch.Watch().stream(...) from the list's resourceVersion, ended
// after two changes and resumed from the last resourceVersion seen. Both
// must list the same objects and print the same events, with the same
// resourceVersions, which are those of the writes.
func TestPythonKubernetesClient(t *testing.T) {
	script, err := filepath.Abs("../../examples/kube-api/python/watch.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run `make python-deps` (as root: apt-get install python3-kubernetes)", python)
	}
	if out, err := exec.Command(python, "-c", "import kubernetes").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import kubernetes: run `make python-deps` (as root: apt-get install python3-kubernetes)\n%s", python, out)
	}
	k := startKubeAPI(t, "python-kube-client")
	k.twoConfigMaps(t)
	var writes []change
	const events = 4
	direct, cached := twinRun(t, k, func(ctx context.Context, kubeconfig string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, python, script, kubeconfig, k.ns, fmt.Sprint(events))
		cmd.Env = append(withoutPythonEnv(os.Environ()), "RESUME_AFTER=2", "PYTHONDONTWRITEBYTECODE=1")
		return cmd
	}, 1, events+1, func() { writes = configMapWrites(t, k.kube, k.ns) })
	sameAsDirect(t, "what the Python client printed", direct, cached)
	k.servedReads(t, "configmaps", "list", "watch")

	if len(direct[0].Items) != 2 {
		t.Errorf("the Python client listed %v, want a and b", direct[0].Items)
	}
	want := []clientLine{
		{Step: "event", Type: "ADDED", Name: "c", ResourceVersion: writes[0].rv},
		{Step: "event", Type: "MODIFIED", Name: "a", ResourceVersion: writes[1].rv},
		{Step: "resume", ResourceVersion: writes[1].rv},
		{Step: "event", Type: "DELETED", Name: "b", ResourceVersion: writes[2].rv},
		{Step: "event", Type: "ADDED", Name: "d", ResourceVersion: writes[3].rv},
	}
	sameAsDirect(t, "what the Python client printed from the API server, and the writes", want, direct[1:])
}
