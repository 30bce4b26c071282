package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
)

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would, runs
// each of while (if any) while it is down, and starts it again on the same
// port with the same certificates.
func (e *Env) KillAPIServer(while ...func() error) error {
	pid, err := e.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("testenv: kill kube-apiserver: %w", err)
	}
	// envtest sees the process gone and only tidies up.
	_ = e.env.ControlPlane.GetAPIServer().Stop()
	for _, f := range while {
		if err := f(); err != nil {
			return err
		}
	}
	if err := e.env.ControlPlane.GetAPIServer().Start(); err != nil {
		return fmt.Errorf("testenv: start kube-apiserver after kill: %w", err)
	}
	return nil
}

// apiServerPID finds kube-apiserver by its certificate folder, which is on
// its command line.
func (e *Env) apiServerPID() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range entries {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmd, []byte("kube-apiserver")) && bytes.Contains(cmd, []byte(e.certDir)) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("testenv: kube-apiserver process not found")
}

// CompactEtcd writes a key outside Kubernetes' prefix (so the revision
// moves past every resourceVersion a client has seen) and compacts etcd's
// history up to it, so a watch from any older resourceVersion gets 410
// Gone once kube-apiserver's watch cache no longer holds it (after a
// restart). It returns the revision. It uses etcd's JSON gateway, so it
// needs no etcd client.
func (e *Env) CompactEtcd() (int64, error) {
	base := e.env.ControlPlane.Etcd.URL.String()
	post := func(path string, body any, out any) error {
		data, _ := json.Marshal(body)
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(data))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd %s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// key "informerd-testenv-compaction", value "x", base64 as the gateway wants.
	if err := post("/v3/kv/put", map[string]string{"key": "aW5mb3JtZXJkLXRlc3RlbnYtY29tcGFjdGlvbg==", "value": "eA=="}, &status); err != nil {
		return 0, fmt.Errorf("testenv: write to etcd: %w", err)
	}
	var rev int64
	fmt.Sscanf(status.Header.Revision, "%d", &rev)
	var out map[string]any
	if err := post("/v3/kv/compaction", map[string]any{"revision": status.Header.Revision, "physical": true}, &out); err != nil {
		return 0, fmt.Errorf("testenv: compact etcd: %w", err)
	}
	return rev, nil
}

// KubeConfigVia returns the admin kubeconfig with its server replaced by
// addr (host:port), e.g. a Proxy's, for a process to reach the API server
// through it. The serving certificate is valid for 127.0.0.1 on any port.
func (e *Env) KubeConfigVia(addr string) ([]byte, error) {
	cfg, err := clientcmd.Load(e.KubeConfig)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	return clientcmd.Write(*cfg)
}

// RestartEtcd stops etcd (SIGTERM) and starts it again on the same port
// with the same data; kube-apiserver reconnects by itself.
func (e *Env) RestartEtcd() error {
	return e.whileEtcdStopped("restart", func(string) error { return nil })
}

// BackupEtcd stops etcd, copies its data directory into dir (which must not
// exist yet), and starts it again: a backup an operator could restore with
// RestoreEtcd. Call it while kube-apiserver is down (inside KillAPIServer),
// as a real backup and restore of etcd's files is done.
func (e *Env) BackupEtcd(dir string) error {
	return e.whileEtcdStopped("back up", func(data string) error { return os.CopyFS(dir, os.DirFS(data)) })
}

// RestoreEtcd stops etcd, replaces its data with the backup in dir, and
// starts it again: etcd's history moves back to the backup's revision, its
// cluster (and so the kube-system namespace's uid) stays the same. Call it
// while kube-apiserver is down (inside KillAPIServer).
func (e *Env) RestoreEtcd(dir string) error {
	return e.whileEtcdStopped("restore", func(data string) error {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		return os.CopyFS(data, os.DirFS(dir))
	})
}

// whileEtcdStopped stops etcd, runs f on its data directory, and starts
// etcd again on the same port.
func (e *Env) whileEtcdStopped(what string, f func(dataDir string) error) error {
	etcd := e.env.ControlPlane.Etcd
	if err := etcd.Stop(); err != nil {
		return fmt.Errorf("testenv: stop etcd to %s it: %w", what, err)
	}
	if err := f(etcd.DataDir); err != nil {
		return fmt.Errorf("testenv: %s etcd: %w", what, err)
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("testenv: start etcd after the %s: %w", what, err)
	}
	return nil
}
