package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// BuildInformerd builds cmd/informerd into dir and returns the binary's path.
func BuildInformerd(dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "informerd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/informerd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: build informerd: %w\n%s", err, out)
	}
	return bin, nil
}

// Daemon is an informerd process.
type Daemon struct {
	bin, config, kubeconfig string
	args                    []string
	env                     []string // added to this process's environment
	// GRPCAddr and MetricsAddr are where it listens; they stay the same
	// across Restart.
	GRPCAddr, MetricsAddr string
	cmd                   *exec.Cmd
	exited                chan struct{}
}

// StartDaemon runs informerd with the config and kubeconfig files, on free
// loopback ports, with pprof on, and waits until /readyz answers 200 (at
// most 5 minutes: a cache of 50,000 pods on a loaded machine takes a while).
func StartDaemon(bin, config, kubeconfig string, args ...string) (*Daemon, error) {
	return StartDaemonEnv(bin, config, kubeconfig, nil, args...)
}

// StartDaemonEnv is StartDaemon with env (NAME=value) added to the
// process's environment, as a DaemonSet's downward API sets NODE_NAME for
// a configuration that names ${NODE_NAME}.
func StartDaemonEnv(bin, config, kubeconfig string, env []string, args ...string) (*Daemon, error) {
	d := &Daemon{bin: bin, config: config, kubeconfig: kubeconfig, args: args, env: env}
	var err error
	if d.GRPCAddr, err = FreeAddr(); err != nil {
		return nil, err
	}
	if d.MetricsAddr, err = FreeAddr(); err != nil {
		return nil, err
	}
	return d, d.start()
}

func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (d *Daemon) start() error {
	d.cmd = exec.Command(d.bin, append([]string{"--config=" + d.config, "--kubeconfig=" + d.kubeconfig,
		"--grpc-address=" + d.GRPCAddr, "--metrics-address=" + d.MetricsAddr, "--log-level=warn", "--enable-profiling"}, d.args...)...)
	d.cmd.Stderr = os.Stderr
	if len(d.env) > 0 {
		d.cmd.Env = append(os.Environ(), d.env...)
	}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start informerd: %w", err)
	}
	d.exited = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("testenv: informerd exited at start: %v", d.cmd.ProcessState)
		default:
		}
		if resp, err := http.Get("http://" + d.MetricsAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.Kill()
	return fmt.Errorf("testenv: informerd not ready within 5 minutes")
}

// PID is the running process's.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Kill ends the process with SIGKILL, as a crash would.
func (d *Daemon) Kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Stop ends the process with SIGTERM (graceful shutdown), then SIGKILL
// after 30s.
func (d *Daemon) Stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.Kill()
	}
}

// Restart starts the process again on the same addresses.
func (d *Daemon) Restart() error { return d.start() }
