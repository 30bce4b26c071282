package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Debian's packages the Python example needs; python3 is Debian's own, which
// sees them (a pyenv or venv python3 on PATH does not).
const (
	python     = "/usr/bin/python3"
	protoc     = "/usr/bin/protoc"
	grpcPlugin = "/usr/bin/grpc_python_plugin"
	// fieldMask is the well-known type cache.proto imports, in protoc's
	// own include folder.
	fieldMask  = "/usr/include/google/protobuf/field_mask.proto"
	aptInstall = "apt-get install -y python3-grpcio python3-protobuf protobuf-compiler libprotobuf-dev protobuf-compiler-grpc"
)

// TestPythonClient generates the Python modules of cache.proto with
// Debian's protoc and gRPC plugin into a temporary folder, and runs
// examples/python/client.py with Debian's python3: list, get, and a watch
// that drops its stream halfway and resumes from the last resourceVersion.
// Every change must arrive exactly once, in order. Once in plaintext, once
// over TLS with a bearer token; then the same with a field mask, on pods.
func TestPythonClient(t *testing.T) {
	dir, err := filepath.Abs("../../examples/python")
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{python, protoc, grpcPlugin, fieldMask} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: the Python example needs Debian's packages; as root run `apt-get update && %s`", bin, aptInstall)
		}
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import grpc and protobuf: as root run `apt-get update && %s`\n%s", python, aptInstall, out)
	}
	gen := t.TempDir()
	if out, err := exec.Command(protoc, "-I", "../../api/proto", "--python_out="+gen, "--grpc_python_out="+gen,
		"--plugin=protoc-gen-grpc_python="+grpcPlugin, "informerd/v1/cache.proto").CombinedOutput(); err != nil {
		t.Fatalf("generate the Python modules: %v\n%s", err, out)
	}
	cmdFor := func(ctx context.Context, addr, resource, namespace string, events int, sec *security, fields string) *exec.Cmd {
		args := []string{filepath.Join(dir, "client.py")}
		if sec != nil {
			args = append(args, "--ca-file", sec.CAFile, "--token-file", sec.TokenFile)
		}
		if fields != "" {
			args = append(args, "--fields", fields)
		}
		cmd := exec.CommandContext(ctx, python, append(args, addr, resource, namespace, fmt.Sprint(events))...)
		cmd.Env = append(withoutPythonEnv(os.Environ()), "PYTHONPATH="+gen, "PYTHONDONTWRITEBYTECODE=1")
		return cmd
	}
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls and token %v", secure), func(t *testing.T) {
			runExample(t, fmt.Sprintf("python-client-%v", secure), secure, cmdFor)
		})
	}
	t.Run("fields", func(t *testing.T) { runProjected(t, "python-client-fields", cmdFor) })
}

// withoutPythonEnv drops variables with which another Python installation
// (pyenv, a venv) could take over Debian's python3.
func withoutPythonEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "PYTHONPATH=") || strings.HasPrefix(kv, "PYTHONHOME=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
