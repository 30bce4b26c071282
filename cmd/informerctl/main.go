// Command informerctl reads Kubernetes objects from informerd's cache as
// kubectl reads them from the API server (get TYPE [NAME], -w to watch),
// lists the served resources, and summarizes health and lag from the
// metrics address. `informerctl --help` lists the commands;
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
