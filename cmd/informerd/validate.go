package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/preflight"
	"github.com/informerd/informerd/internal/upstream"
	"github.com/informerd/informerd/pkg/client"
)

// validate implements --validate-config for the config file at path and
// the cluster of kubeconfig, or the upstream informerd, and returns the
// exit status.
func validate(path, kubeconfig string, up client.Config) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("config %s: syntax ok, %d resources\n", path, len(cfg.Resources))
	if up.Address != "" {
		return validateUpstream(cfg, up)
	}
	restConfig, err := daemon.LoadKubeconfig(kubeconfig)
	if err != nil {
		fmt.Printf("no cluster checked (no kubeconfig: %v)\n", err)
		return 0
	}
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "discovery client:", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := preflight.Check(ctx, cfg, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "check against %s: %v\n", restConfig.Host, err)
		return 1
	}
	fmt.Printf("against %s:\n", restConfig.Host)
	if !preflight.Write(os.Stdout, results) {
		return 1
	}
	return 0
}

// validateUpstream checks each resource against the upstream informerd.
func validateUpstream(cfg *config.Config, up client.Config) int {
	conn, err := client.Dial(up)
	if err != nil {
		fmt.Fprintln(os.Stderr, "--upstream-informerd:", err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := upstream.New(conn, up.Address)
	fmt.Printf("against the upstream informerd at %s:\n", up.Address)
	status := 0
	for _, r := range cfg.Resources {
		problems := src.Check(ctx, r)
		if len(problems) == 0 {
			fmt.Printf("  %s: ok\n", r.Resource)
			continue
		}
		status = 1
		for _, p := range problems {
			fmt.Printf("  %s: %s\n", r.Resource, p)
		}
	}
	return status
}
