// Command informerd is a cache-proxy for the Kubernetes API: it watches each
// configured resource once and serves List, Get and Watch over gRPC to many
// clients. main only parses flags and runs the daemon package's informerd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/informerd/informerd/internal/daemon"
)

func main() {
	o := daemon.NewOptions()
	o.AddFlags(flag.CommandLine)
	flag.Parse()

	log, err := newLogger(o.LogFormat, o.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informerd:", err)
		os.Exit(2)
	}
	if o.ValidateConfig != "" {
		os.Exit(validate(o.ValidateConfig, o.Kubeconfig, o.Upstream))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("informerd stopped", "err", err)
		os.Exit(1)
	}
}

// run runs informerd until ctx ends (SIGTERM), then shuts down in order.
func run(ctx context.Context, o daemon.Options, log *slog.Logger) error {
	d, err := daemon.New(o, log)
	if err != nil {
		return err
	}
	d.InstallClientGoMetrics()
	d.TuneRuntime()
	return d.Run(ctx)
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, hopts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, hopts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	log := slog.New(h)
	// client-go logs through klog; send it to the same sink.
	klog.SetSlogLogger(log)
	return log, nil
}
