// Command informerctl reads Kubernetes objects from informerd's cache: get,
// list and watch them, list the served resources, and summarize health and
// lag from the metrics endpoint. `informerctl --help` lists the commands;
// docs/clients.md describes them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/informerd/informerd/internal/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
