package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informerd/informerd/internal/transport"
)

// TestRefusedAtStart checks the security checks run before informerd
// contacts anything: an insecure listener stops it with a reason.
func TestRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("resources:\n  - resource: configmaps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// No cluster: a check that passes ends at the kubeconfig instead.
	noCluster := filepath.Join(dir, "no-such-kubeconfig")
	base := options{configPath: cfg, kubeconfig: noCluster, authMode: "kubernetes"}
	tests := []struct {
		name     string
		change   func(*options)
		insecure bool
		want     string
	}{
		{"plaintext on all interfaces", func(o *options) { o.grpcAddress = "0.0.0.0:50051" }, true, "--insecure-allow-plaintext"},
		{"plaintext on a pod IP", func(o *options) { o.grpcAddress = "10.1.2.3:50051" }, true, "--insecure-allow-plaintext"},
		{"auth none on all interfaces", func(o *options) { o.grpcAddress = ":50051"; o.authMode = "none"; o.allowPlaintext = true }, true, "--auth-mode=none"},
		{"mtls without mtlsClients", func(o *options) {
			o.grpcAddress, o.authMode, o.tls.CertFile, o.tls.ClientCAFile = ":50051", "mtls", "c", "ca"
		}, false, "no mtlsClients"},
		{"plaintext allowed by the flag", func(o *options) { o.grpcAddress = "0.0.0.0:50051"; o.allowPlaintext = true }, false, "kubeconfig"},
		{"plaintext on loopback", func(o *options) { o.grpcAddress = "127.0.0.1:50051" }, false, "kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			err := run1(context.Background(), o, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if errors.Is(err, transport.ErrInsecure) != tc.insecure {
				t.Errorf("errors.Is(err, ErrInsecure) = %v, want %v", !tc.insecure, tc.insecure)
			}
		})
	}
}
