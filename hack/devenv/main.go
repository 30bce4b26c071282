// Command devenv is what `make run` starts: a local kube-apiserver and etcd
// (unless KUBECONFIG names a cluster), a few sample objects, and informerd in
// the foreground. Ctrl-C stops informerd, then the control plane.
//
// Usage: devenv [-config FILE] -- INFORMERD [ARGS...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/informerd/informerd/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run() error {
	configPath := flag.String("config", "deploy/config.example.yaml", "informerd config file")
	workDir := flag.String("workdir", "_run", "folder for the local control plane's kubeconfig")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		return errors.New("usage: devenv [-config FILE] -- INFORMERD [ARGS...]")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "devenv")

	// Signals reach the whole foreground process group; informerd handles its
	// own, and this process waits for it before stopping the control plane.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	caFile := filepath.Join(*workDir, "informerd-ca.crt")
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig != "" {
		log.Info("KUBECONFIG is set: running informerd against that cluster", "kubeconfig", kubeconfig)
	} else {
		log.Info("starting local kube-apiserver and etcd")
		env, err := testenv.Start(testenv.Options{})
		if err != nil {
			return err
		}
		defer func() {
			log.Info("stopping local kube-apiserver and etcd")
			if err := env.Stop(); err != nil {
				log.Error("stop control plane", "err", err)
			}
		}()
		if err := os.MkdirAll(*workDir, 0o700); err != nil {
			return err
		}
		kubeconfig, err = filepath.Abs(filepath.Join(*workDir, "kubeconfig"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
			return err
		}
		log.Info("local control plane is up", "server", env.Config.Host, "kubeconfig", kubeconfig,
			"try", "KUBECONFIG="+kubeconfig+" kubectl get pods -A (if you have kubectl)")
		seedCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err = seed(seedCtx, env)
		if err == nil {
			err = writeInformerdKubeconfig(seedCtx, env, filepath.Join(*workDir, "informerd.kubeconfig"), caFile)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("create sample objects: %w", err)
		}
		log.Info("informerd serves the Kubernetes API on "+kubeAPIAddress, "try", "bin/controlplane/current/kubectl --kubeconfig "+filepath.Join(*workDir, "informerd.kubeconfig")+" get pods -A")
	}

	// The Kubernetes API with a certificate informerd makes and renews
	// itself, its CA where the kubeconfig above looks for it.
	flags := []string{"--kubeconfig", kubeconfig, "--config", *configPath, "--kube-api-address", kubeAPIAddress, "--kube-api-tls-self-signed", caFile}
	cmd := exec.Command(args[0], append(flags, args[1:]...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start informerd: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return informerdExit(err)
	case <-ctx.Done():
		// The terminal's SIGINT reached informerd too; a plain kill(1) did not.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err := informerdExit(err); err != nil {
				log.Warn("informerd exited", "err", err)
			}
		case <-time.After(30 * time.Second):
			log.Warn("informerd did not stop within 30s; killing it")
			_ = cmd.Process.Kill()
			<-done
		}
		return nil
	}
}

func informerdExit(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("informerd: %w", err)
}
