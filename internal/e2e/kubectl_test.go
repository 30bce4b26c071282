package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/testenv"
)

// kubectlRun is what one kubectl command printed and how it ended.
type kubectlRun struct {
	Stdout, Stderr string
	Exit           int
}

// kubectlCmd builds a command of the kubectl that `make testenv` built,
// with kubeconfig, the fixture's discovery cache and no user preferences
// (kuberc).
func (k *kubeAPI) kubectlCmd(ctx context.Context, t *testing.T, kubeconfig string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + kubeconfig, "--cache-dir=" + k.kubectlCache}, args...)...)
	cmd.Env = append(os.Environ(), "KUBERC=off", "KUBECONFIG=")
	return cmd
}

// kubectl runs a kubectl command to its end, with stdin.
func (k *kubeAPI) kubectl(t *testing.T, kubeconfig, stdin string, args ...string) kubectlRun {
	t.Helper()
	// Bounded, so that a hung request fails the test with what kubectl
	// said instead of holding the whole run.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := k.kubectlCmd(ctx, t, kubeconfig, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := kubectlRun{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return r
}

// firstColumn is the NAME column of kubectl's default output: informerd's
// Table has NAME and AGE for every type, the API server's a type's own
// columns.
func firstColumn(out string) []string {
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// TestKubectlGet runs kubectl get in each output format, with label and
// field selectors, and api-resources, against the API server and through
// informerd: the same output, except that the default output (a Table the
// server prints) is compared by its NAME column.
func TestKubectlGet(t *testing.T) {
	k := startKubeAPI(t, "kubectl-get")
	ctx := context.Background()
	var rv string
	for i := range 5 {
		cm, err := k.kube.CoreV1().ConfigMaps(k.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i), Labels: map[string]string{"app": []string{"web", "db"}[i%2]}},
			Data:       map[string]string{"i": fmt.Sprint(i)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv = cm.ResourceVersion
	}
	k.waitCached(t, "configmaps", rv)
	for i := range 4 {
		p, err := k.kube.CoreV1().Pods(k.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%2), Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv = p.ResourceVersion
	}
	k.waitCached(t, "pods", rv)

	const jsonpath = `jsonpath={range .items[*]}{.metadata.name} {.metadata.resourceVersion} {.data}{"\n"}{end}`
	for _, tc := range []struct {
		name string
		args []string
		// names compares only the first column: a Table's NAME.
		names bool
	}{
		{name: "default output", args: []string{"get", "configmaps"}, names: true},
		{name: "default output of pods", args: []string{"get", "pods"}, names: true},
		{name: "default output of one object", args: []string{"get", "configmap", "cm1"}, names: true},
		{name: "-o name", args: []string{"get", "configmaps", "-o", "name"}},
		{name: "-o json", args: []string{"get", "configmaps", "-o", "json"}},
		{name: "-o yaml", args: []string{"get", "pods", "-o", "yaml"}},
		{name: "-o jsonpath", args: []string{"get", "configmaps", "-o", jsonpath}},
		{name: "one object -o json", args: []string{"get", "configmap", "cm3", "-o", "json"}},
		{name: "-l", args: []string{"get", "configmaps", "-l", "app=web", "-o", "name"}},
		{name: "-l set-based, default output", args: []string{"get", "configmaps", "-l", "app in (db)"}, names: true},
		{name: "--field-selector on an index", args: []string{"get", "pods", "--field-selector", "spec.nodeName=n1", "-o", "name"}},
		{name: "--field-selector on an index, default output", args: []string{"get", "pods", "--field-selector", "spec.nodeName=n0"}, names: true},
		{name: "--field-selector and -l", args: []string{"get", "pods", "--field-selector", "spec.nodeName!=n0", "-l", "app=web", "-o", "json"}},
		{name: "--field-selector on the name", args: []string{"get", "configmaps", "--field-selector", "metadata.name=cm2", "-o", "yaml"}},
		{name: "--chunk-size pages", args: []string{"get", "configmaps", "--chunk-size=2", "-o", "name"}},
		{name: "-o wide", args: []string{"get", "pods", "-o", "wide"}, names: true},
		{name: "-o custom-columns", args: []string{"get", "configmaps", "-o", "custom-columns=NAME:.metadata.name,RV:.metadata.resourceVersion,APP:.metadata.labels.app"}},
		{name: "--sort-by", args: []string{"get", "pods", "--sort-by=.spec.nodeName", "-o", "name"}},
		{name: "--server-print=false", args: []string{"get", "configmaps", "--server-print=false", "-l", "app=db"}, names: true},
		{name: "describe", args: []string{"describe", "pod", "p1"}},
		{name: "absent object", args: []string{"get", "configmap", "absent"}},
		{name: "nothing selected", args: []string{"get", "configmaps", "-l", "app=none"}},
		{name: "api-resources", args: []string{"api-resources"}},
		// informerd caches pods in every namespace, configmaps only in one.
		{name: "every namespace", args: []string{"get", "pods", "-A", "-o", "name"}},
		{name: "every namespace, beyond the cache", args: []string{"get", "configmaps", "-A", "-o", "name"}},
		{name: "another namespace, beyond the cache", args: []string{"get", "configmaps", "-n", "kube-system", "-o", "name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := k.kubectl(t, k.direct, "", tc.args...)
			cached := k.kubectl(t, k.cached, "", tc.args...)
			if tc.names {
				direct.Stdout = strings.Join(firstColumn(direct.Stdout), "\n")
				cached.Stdout = strings.Join(firstColumn(cached.Stdout), "\n")
			}
			sameAsDirect(t, "kubectl "+strings.Join(tc.args, " "), direct, cached)
			if direct.Stdout == "" && direct.Stderr == "" {
				t.Error("kubectl printed nothing")
			}
		})
	}
	k.servedReads(t, "configmaps", "get", "list")
	k.servedReads(t, "pods", "list")
}

// TestKubectlWatch runs kubectl get -w (a list, then a watch from its
// resourceVersion) against the API server and through informerd at once,
// then changes the ConfigMaps: both must print the same events, with the
// same resourceVersions, as JSON with --output-watch-events, and the same
// names in the default output.
func TestKubectlWatch(t *testing.T) {
	k := startKubeAPI(t, "kubectl-watch")
	k.twoConfigMaps(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type event struct{ Type, Name, RV string }
	parse := func(t *testing.T, vs [][]byte) []event {
		var out []event
		for _, v := range vs {
			var e struct {
				Type   string
				Object metav1.PartialObjectMetadata
			}
			if err := json.Unmarshal(v, &e); err != nil {
				t.Fatalf("kubectl printed %s: %v", v, err)
			}
			out = append(out, event{e.Type, e.Object.Name, e.Object.ResourceVersion})
		}
		return out
	}

	asJSON := []string{"get", "configmaps", "-w", "--output-watch-events", "-o", "json"}
	table := []string{"get", "configmaps", "-w"}
	var outs []*output
	for _, kc := range []string{k.direct, k.cached} {
		outs = append(outs, startOutput(t, k.kubectlCmd(ctx, t, kc, asJSON...), true), startOutput(t, k.kubectlCmd(ctx, t, kc, table...), false))
	}
	// Each has listed "a" and "b" (the Table with its header) and watches.
	var got [4][][]byte
	for i, o := range outs {
		got[i] = o.next(t, 2+i%2)
	}
	writes := configMapWrites(t, k.kube, k.ns)
	for i, o := range outs {
		got[i] = append(got[i], o.next(t, len(writes))...)
	}

	direct, cached := parse(t, got[0]), parse(t, got[2])
	sameAsDirect(t, "kubectl "+strings.Join(asJSON, " "), direct, cached)
	want := []event{{"ADDED", "a", ""}, {"ADDED", "b", ""}, {"ADDED", "c", writes[0].rv}, {"MODIFIED", "a", writes[1].rv}, {"DELETED", "b", writes[2].rv}, {"ADDED", "d", writes[3].rv}}
	for i := range direct {
		if i < 2 {
			direct[i].RV = "" // as listed
		}
	}
	if diff := cmp.Diff(want, direct); diff != "" {
		t.Errorf("events kubectl printed from the API server (-want +got):\n%s", diff)
	}
	sameAsDirect(t, "kubectl "+strings.Join(table, " "), firstColumn(string(bytes.Join(got[1], []byte("\n")))), firstColumn(string(bytes.Join(got[3], []byte("\n")))))
	for _, o := range outs {
		o.stop()
	}
	k.servedReads(t, "configmaps", "list", "watch")
}

// TestKubectlWrites runs kubectl create, apply (client-side and
// server-side), label and delete through informerd, which forwards them
// with the kubeconfig's ServiceAccount token, then the same commands
// against the API server: kubectl prints the same, and after each step
// kubectl get shows the same object, at the same resourceVersion, through
// both. A write the token may not make is refused by the API server, with
// the same message through informerd.
func TestKubectlWrites(t *testing.T) {
	k := startKubeAPI(t, "kubectl-writes")
	manifest := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: written\ndata:\n  k: v" + v + "\n"
	}
	steps := []struct {
		name, stdin string
		args        []string
	}{
		{"create", manifest("1"), []string{"create", "-f", "-"}},
		{"apply", manifest("2"), []string{"apply", "-f", "-"}},
		{"server-side apply", manifest("3"), []string{"apply", "--server-side", "--force-conflicts", "-f", "-"}},
		{"label", "", []string{"label", "configmap", "written", "tier=front"}},
		{"delete", "", []string{"delete", "configmap", "written"}},
		{"forbidden", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n", []string{"create", "-f", "-"}},
	}
	var printed [2][]kubectlRun
	for i, through := range []string{k.cached, k.direct} {
		for _, s := range steps {
			r := k.kubectl(t, through, s.stdin, s.args...)
			printed[i] = append(printed[i], r)
			if s.name != "forbidden" && r.Exit != 0 {
				t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(s.args, " "), r.Exit, r.Stderr)
			}
			// What the step left, read through both.
			get := []string{"get", "configmap", "written", "-o", "json", "--ignore-not-found"}
			direct := k.kubectl(t, k.direct, "", get...)
			var meta metav1.PartialObjectMetadata
			if direct.Stdout != "" {
				if err := json.Unmarshal([]byte(direct.Stdout), &meta); err != nil {
					t.Fatal(err)
				}
				k.waitCached(t, "configmaps", meta.ResourceVersion)
			} else {
				k.waitGone(t, "configmaps", "written")
			}
			sameAsDirect(t, fmt.Sprintf("after %s through %s, kubectl get", s.name, through), direct, k.kubectl(t, k.cached, "", get...))
		}
	}
	sameAsDirect(t, "what kubectl printed", printed[1], printed[0])
	k.servedReads(t, "configmaps", "get")
	if last := printed[0][len(steps)-1]; last.Exit == 0 || !strings.Contains(last.Stderr, "system:serviceaccount:"+k.ns+":client") {
		t.Errorf("creating a Secret through informerd: %+v; want the API server's Forbidden for the ServiceAccount", last)
	}
}
