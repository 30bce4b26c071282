package daemon_test

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/internal/transport"
)

// discard is the log of daemons under test.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestRefusedAtStart checks the security checks run before informerd
// contacts anything: an insecure listener stops it with a reason, from
// Validate and from New.
func TestRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	base := daemon.NewOptions()
	base.ConfigPath = testenv.WriteFile(t, dir, "config.yaml", []byte("resources:\n  - resource: configmaps\n"))
	// No cluster: a check that passes ends at the kubeconfig instead.
	base.Kubeconfig = filepath.Join(dir, "no-such-kubeconfig")
	base.AuthMode = "kubernetes"
	tests := []struct {
		name     string
		change   func(*daemon.Options)
		insecure bool
		want     string
	}{
		{"plaintext on all interfaces", func(o *daemon.Options) { o.GRPCAddress = "0.0.0.0:50051" }, true, "--insecure-allow-plaintext"},
		{"plaintext on a pod IP", func(o *daemon.Options) { o.GRPCAddress = "10.1.2.3:50051" }, true, "--insecure-allow-plaintext"},
		{"auth none on all interfaces", func(o *daemon.Options) { o.GRPCAddress = ":50051"; o.AuthMode = "none"; o.AllowPlaintext = true }, true, "--auth-mode=none"},
		{"mtls without mtlsClients", func(o *daemon.Options) {
			o.GRPCAddress, o.AuthMode, o.TLS.CertFile, o.TLS.ClientCAFile = ":50051", "mtls", "c", "ca"
		}, false, "no mtlsClients"},
		{"plaintext allowed by the flag", func(o *daemon.Options) { o.GRPCAddress = "0.0.0.0:50051"; o.AllowPlaintext = true }, false, "kubeconfig"},
		{"plaintext on loopback", func(o *daemon.Options) { o.GRPCAddress = "127.0.0.1:50051" }, false, "kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			// A refusal by Validate names the flag; a pass leaves New to
			// fail at the kubeconfig.
			if err := o.Validate(); (err == nil) != (tc.want == "kubeconfig") {
				t.Errorf("Validate() = %v", err)
			}
			d, err := daemon.New(o, discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, tc.want)
			}
			if d != nil {
				t.Errorf("New returned a daemon with its error")
			}
			if errors.Is(err, transport.ErrInsecure) != tc.insecure {
				t.Errorf("errors.Is(err, ErrInsecure) = %v, want %v", !tc.insecure, tc.insecure)
			}
		})
	}
}

// TestValidateConfig: a configuration is required, read from the file or
// given parsed, and checked.
func TestValidateConfig(t *testing.T) {
	dir := t.TempDir()
	cms := parse(t, "resources: [{resource: configmaps}]")
	tests := []struct {
		name   string
		change func(*daemon.Options)
		want   string // "" for no error
	}{
		{"no config", func(*daemon.Options) {}, "--config is required"},
		{"a file", func(o *daemon.Options) {
			o.ConfigPath = testenv.WriteFile(t, dir, "good.yaml", []byte("resources: [{resource: configmaps}]\n"))
		}, ""},
		{"an invalid file", func(o *daemon.Options) {
			o.ConfigPath = testenv.WriteFile(t, dir, "bad.yaml", []byte("resources: [{resource: Pods}]\n"))
		}, "must be lower case"},
		{"a parsed config", func(o *daemon.Options) { o.Config = parse(t, "resources: [{resource: configmaps}]") }, ""},
		{"a memory limit ratio above 1", func(o *daemon.Options) { o.Config, o.MemoryLimitRatio = cms, 1.2 }, "--memory-limit-ratio must be from 0 (off) to 1"},
		{"a memory limit ratio of 0 is off", func(o *daemon.Options) { o.Config, o.MemoryLimitRatio = cms, 0 }, ""},
		{"a GC percent of 0", func(o *daemon.Options) { o.Config, o.GCPercent = cms, 0 }, "--gc-percent must be positive"},
		{"negative HTTP/2 streams", func(o *daemon.Options) { o.Config, o.KubeAPIHTTP2MaxStreams = cms, -1 }, "--kube-api-http2-max-streams must be 0"},
		{"a parsed config without mtlsClients", func(o *daemon.Options) {
			o.Config = parse(t, "resources: [{resource: configmaps}]")
			o.AuthMode, o.TLS.CertFile, o.TLS.ClientCAFile = "mtls", "c", "ca"
		}, "no mtlsClients"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := daemon.NewOptions()
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
