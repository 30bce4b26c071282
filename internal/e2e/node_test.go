package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNodeClient runs examples/node/client.js: list, get, and a watch that
// drops its stream halfway and resumes from the last resourceVersion. Every
// change must arrive exactly once, in order. Once in plaintext, once over
// TLS with a bearer token; then the same with a field mask, on pods.
func TestNodeClient(t *testing.T) {
	dir, node := nodeExample(t, "examples/node", "@grpc/grpc-js")
	cmdFor := func(ctx context.Context, addr, resource, namespace string, events int, sec *security, fields string) *exec.Cmd {
		args := []string{filepath.Join(dir, "client.js"), addr, resource, namespace, fmt.Sprint(events)}
		if fields != "" {
			args = append(args, fields)
		}
		cmd := exec.CommandContext(ctx, node, args...)
		if sec != nil {
			cmd.Env = append(os.Environ(), "INFORMERD_CA_FILE="+sec.CAFile, "INFORMERD_TOKEN_FILE="+sec.TokenFile)
		}
		return cmd
	}
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls and token %v", secure), func(t *testing.T) {
			runExample(t, fmt.Sprintf("node-client-%v", secure), secure, cmdFor)
		})
	}
	t.Run("fields", func(t *testing.T) { runProjected(t, "node-client-fields", cmdFor) })
}

// nodeExample returns the folder of the Node.js example at path (from the
// repository's root) and the node binary; it fails, saying what to run,
// when node or the example's module is not installed.
func nodeExample(t *testing.T, path, module string) (dir, node string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", module)); err != nil {
		t.Fatalf("%s has no node_modules: run `make node-deps` (npm ci in %s): %v", path, path, err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: install Node.js 20 or newer: %v", err)
	}
	return dir, node
}
