// Package testenv starts a real kube-apiserver backed by a real etcd for
// informerd's integration tests and for `make run`. The binaries are the ones
// `make testenv` builds from Go modules at pinned versions (hack/controlplane);
// controller-runtime's envtest runs them.
//
// A test package starts one control plane in TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
//
// There is no skip: without the binaries the tests fail and say how to build
// them.
package testenv

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AuditNamespace is the namespace whose requests kube-apiserver writes to
// AuditLog, at level Metadata. No other request is audited, so the rest of
// the suite pays nothing.
const AuditNamespace = "informerd-audit"

// DirEnv names the environment variable that overrides where the control plane
// binaries are looked up. The default is bin/controlplane/current under the
// repository root.
const DirEnv = "INFORMERD_CONTROLPLANE_DIR"

// ErrBinariesMissing reports that kube-apiserver or etcd has not been built.
var ErrBinariesMissing = errors.New("testenv: control plane binaries not found")

// Env is a running control plane. Its methods may be called concurrently.
type Env struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's contents.
	KubeConfig []byte

	env     *envtest.Environment
	certDir string
}

// Options tunes Start. The zero value is ready to use.
type Options struct {
	// CRDDirectoryPaths are folders of CustomResourceDefinition YAML installed
	// before Start returns.
	CRDDirectoryPaths []string
	// AttachOutput copies the control plane's logs to this process's stdout
	// and stderr.
	AttachOutput bool
}

// Start starts kube-apiserver and etcd and waits until the API server serves.
// The caller must call Stop.
func Start(opts Options) (*Env, error) {
	dir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		AttachControlPlaneOutput: opts.AttachOutput,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  10 * time.Second, // then SIGKILL: open watches can hold kube-apiserver longer
	}
	// A cert folder of our own survives an API server restart, so clients
	// keep trusting it (envtest regenerates certs in a folder it made).
	certDir, err := os.MkdirTemp("", "informerd-apiserver-certs-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	api := te.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	api.Path = filepath.Join(dir, "kube-apiserver")
	// Configure's values replace envtest's defaults (authorization-mode
	// is RBAC there) and are kept for RestartAPIServer.
	args := api.Configure()
	// The Node authorizer as in a real cluster: a kubelet
	// (system:node:<name> in system:nodes) may list the pods of its node
	// (fieldSelector spec.nodeName), not all pods.
	args.Set("authorization-mode", "Node,RBAC")
	// Sharded list and watch (KEP-5866), alpha in v1.37, which informerd
	// serves from its cache: the differential suite compares them.
	args.Set("feature-gates", "ShardedListAndWatch=true")
	policy := filepath.Join(certDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy), 0o600); err != nil {
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("testenv: write audit policy: %w", err)
	}
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", filepath.Join(certDir, auditLogName))
	// Blocking: the event is written before the response ends, so a test
	// reads it as soon as its request returned.
	args.Set("audit-log-mode", "blocking")
	// etcd's data lives in our folder too, so RestartEtcd keeps it.
	if err := os.MkdirAll(filepath.Join(certDir, "etcd-data"), 0o700); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	te.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd"), DataDir: filepath.Join(certDir, "etcd-data")}
	if _, err := te.Start(); err != nil {
		_ = te.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("testenv: start control plane from %s: %w", dir, err)
	}
	admin, err := te.AddUser(envtest.User{Name: "informerd-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: add admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: admin kubeconfig: %w", err)
	}
	return &Env{Config: admin.Config(), KubeConfig: kubeconfig, env: te, certDir: certDir}, nil
}

// UserConfig returns a client config that authenticates as a new user with
// the given groups and no other permissions, for RBAC tests.
func (e *Env) UserConfig(name string, groups []string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("testenv: add user %s: %w", name, err)
	}
	return u.Config(), nil
}

// AuditLog is the path of kube-apiserver's audit log: JSON lines, an
// audit.k8s.io/v1 Event at level Metadata for each request in
// AuditNamespace when its response is complete (a watch has one more when
// it starts), written before the response ends; ReadAuditEvents parses it.
// The file survives RestartAPIServer; Stop removes it.
func (e *Env) AuditLog() string { return filepath.Join(e.certDir, auditLogName) }

// CertDir is the API server's certificate folder; its path is on the API
// server's command line, which tells its process apart.
func (e *Env) CertDir() string { return e.certDir }

// ServiceAccountSigner returns the file of the key the API server signs
// ServiceAccount tokens with (PKCS#8 PEM, ECDSA P-256) and the issuer it
// puts in them, for tests that forge tokens, such as expired ones.
func (e *Env) ServiceAccountSigner() (keyFile, issuer string) {
	api := e.env.ControlPlane.GetAPIServer()
	return filepath.Join(api.CertDir, "sa-signer.key"), api.SecureServing.URL("https", "/").String()
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same certificates; etcd keeps running. The new API server's watch
// cache starts at etcd's current revision, so a watch resuming from an older
// resourceVersion gets 410 Gone and must relist.
func (e *Env) RestartAPIServer() error {
	api := e.env.ControlPlane.GetAPIServer()
	// Stop sends SIGTERM and, when the API server has not exited within
	// the stop timeout (it may wait for open requests), SIGKILL; either
	// way it is gone, and a restart is what the caller asked for.
	stopErr := api.Stop()
	if err := api.Start(); err != nil {
		return errors.Join(fmt.Errorf("testenv: start kube-apiserver again: %w", err), stopErr)
	}
	return nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (e *Env) Stop() error {
	err := e.env.Stop()
	_ = os.RemoveAll(e.certDir)
	if err != nil {
		return fmt.Errorf("testenv: stop control plane: %w", err)
	}
	return nil
}

// Main runs a test package against a control plane started for it: it starts
// one, stores it in *env, runs the tests, stops it and exits. When the control
// plane cannot start the package fails with the reason.
//
// A process that can only run a fuzz target starts none and leaves *env nil:
// a fuzz worker, and `go test -run='^$' -fuzz=X` (what hack/fuzz.sh runs).
// Fuzz targets are for parsers and in-memory parts, so they must not use
// env; starting a control plane in every worker would cost more than the
// fuzzing itself.
func Main(m *testing.M, env **Env) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !needsControlPlane(flagValue("test.run"), flagValue("test.bench"), flagValue("test.fuzz"), flagValue("test.fuzzworker") == "true") {
		os.Exit(m.Run())
	}
	os.Exit(run(m, env))
}

// needsControlPlane reports whether a test binary run with these -test.*
// flags may run a test or benchmark, rather than only a fuzz target.
func needsControlPlane(run, bench, fuzz string, fuzzWorker bool) bool {
	if fuzzWorker {
		return false // a worker runs nothing but the fuzz function
	}
	return fuzz == "" || run != "^$" || bench != ""
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func run(m *testing.M, env **Env) int {
	e, err := Start(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// BinaryDir returns the folder holding kube-apiserver and etcd, or an error
// wrapping ErrBinariesMissing that tells the user to run `make testenv`.
func BinaryDir() (string, error) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "controlplane", "current")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%w: %s is missing in %s; run `make testenv` to build them (or set %s)",
				ErrBinariesMissing, name, dir, DirEnv)
		}
	}
	return dir, nil
}

// Kubectl returns the path of the kubectl that `make testenv` builds
// beside kube-apiserver from the same pinned modules, so that tests never
// depend on a kubectl the machine happens to have; or an error wrapping
// ErrBinariesMissing that tells the user to run `make testenv`.
func Kubectl() (string, error) {
	dir, err := BinaryDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: kubectl is missing in %s; run `make testenv` to build it (or set %s)", ErrBinariesMissing, dir, DirEnv)
	}
	return p, nil
}

// repoRoot finds the informerd module root from the working directory, which
// `go test` sets to the package folder.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "controlplane", "build.sh")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("testenv: %w", err)
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: not inside the informerd repository (from %s); set %s", ErrBinariesMissing, wd, DirEnv)
		}
	}
}
