package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNodeKubernetesClient runs examples/kube-api/node/informer.mjs, an
// unmodified makeInformer of @kubernetes/client-node, against the API
// server and through informerd at once: both must sync the same objects and
// report the same changes, with the same resourceVersions, which are those
// of the writes.
func TestNodeKubernetesClient(t *testing.T) {
	dir, node := nodeExample(t, "examples/kube-api/node", "@kubernetes/client-node")
	k := startKubeAPI(t, "node-kube-client")
	k.twoConfigMaps(t)
	var writes []change
	const events = 4
	direct, cached := twinRun(t, k, func(ctx context.Context, kubeconfig string) *exec.Cmd {
		return exec.CommandContext(ctx, node, filepath.Join(dir, "informer.mjs"), kubeconfig, k.ns, fmt.Sprint(events))
	}, 3, events, func() { writes = configMapWrites(t, k.kube, k.ns) })
	sameAsDirect(t, "what the Node.js informer printed", direct, cached)
	k.servedReads(t, "configmaps", "list", "watch")

	want := []clientLine{
		{Step: "event", Type: "add", Name: "a", ResourceVersion: direct[0].ResourceVersion},
		{Step: "event", Type: "add", Name: "b", ResourceVersion: direct[1].ResourceVersion},
		{Step: "synced", Names: []string{"a", "b"}},
		{Step: "event", Type: "add", Name: "c", ResourceVersion: writes[0].rv},
		{Step: "event", Type: "update", Name: "a", ResourceVersion: writes[1].rv},
		{Step: "event", Type: "delete", Name: "b", ResourceVersion: writes[2].rv},
		{Step: "event", Type: "add", Name: "d", ResourceVersion: writes[3].rv},
	}
	sameAsDirect(t, "what the Node.js informer printed from the API server, and the writes", want, direct)
}
