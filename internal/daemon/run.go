package daemon

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/oklog/run"

	"github.com/informerd/informerd/internal/health"
)

// Run serves until ctx ends or a part fails, then stops in order: gRPC
// health NOT_SERVING, every Watch stream ended with a status that says where
// to resume, unary calls given ShutdownTimeout to finish, the metrics
// server, and the caches last, so nothing is served from a cache that has
// stopped following the API server. It returns the error of the part that
// failed first, nil when ctx ended, and only once every goroutine it started
// has exited.
func (d *Daemon) Run(ctx context.Context) error {
	d.log.Info("informerd is listening", "grpc", d.GRPCAddr(), "tls", d.grpcTLS, "auth", d.authMode,
		"metrics", d.MetricsURL()+"/metrics", "kube-api", d.KubeAPIURL())
	var g run.Group
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	for _, t := range d.certs {
		g.Add(func() error { return t.Run(ctx) }, func(error) { cancel() })
	}
	if d.selfCert != nil {
		g.Add(func() error { return d.selfCert.Run(ctx) }, func(error) { cancel() })
	}
	g.Add(func() error { return health.SyncGRPC(ctx, d.caches, d.healthSrv, d.log) }, func(error) { cancel() })
	if c := d.checkLater; c != nil {
		checked := make(chan struct{})
		g.Add(func() error {
			defer close(checked)
			if err := checkAPIServer(ctx, c, d.log, len(d.caches.Served())); err != nil && ctx.Err() == nil {
				d.log.Warn("the API server does not answer; the saved state is served until it does", "err", err)
			}
			<-ctx.Done()
			return nil
		}, func(error) { cancel(); <-checked })
	}
	// run.Group interrupts the parts in the order they were added: health
	// and gRPC first, then metrics, then the caches.
	g.Add(func() error { return d.grpcSrv.Serve(d.grpcLis) }, func(error) { d.stopGRPC() })
	if d.kubeSrv != nil {
		g.Add(func() error {
			if err := d.kubeSrv.Serve(d.kubeLis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}, func(error) { d.stopKubeAPI() })
	}
	g.Add(func() error {
		if err := d.httpSrv.Serve(d.metricsLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, func(error) {
		sctx, scancel := context.WithTimeout(context.Background(), d.shutdownTimeout)
		defer scancel()
		_ = d.httpSrv.Shutdown(sctx)
	})
	if d.memory.returnMemory {
		m := newMemoryReturner(d.caches, memoryPollInterval, d.log.With("component", "memory"))
		g.Add(func() error { return m.Run(ctx) }, func(error) { cancel() })
	}
	if d.auditor != nil {
		// Stopped after the Kubernetes API's server, so the last
		// requests' events are written before the log closes.
		auditCtx, stopAudit := context.WithCancel(context.Background())
		defer stopAudit()
		g.Add(func() error { return d.auditor.Run(auditCtx) }, func(error) { stopAudit() })
	}
	cacheCtx, stopCaches := context.WithCancel(context.Background())
	defer stopCaches()
	g.Add(func() error { return d.caches.Run(cacheCtx) }, func(error) { stopCaches() })
	err := g.Run()
	if d.state != nil {
		d.state.Close()
	}
	if d.upstream != nil {
		_ = d.upstream.Close()
	}
	d.log.Info("informerd stopped")
	return err
}

// stopGRPC reports NOT_SERVING, ends the watch streams with a status that
// says where to resume, then lets unary calls finish within the shutdown
// timeout and cuts them after it.
func (d *Daemon) stopGRPC() {
	d.healthSrv.Shutdown()
	d.cacheSrv.Stop()
	stopped := make(chan struct{})
	go func() { d.grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(d.shutdownTimeout):
		d.grpcSrv.Stop()
		<-stopped
	}
}

// goAwayGrace is how long the Kubernetes API's watches outlive its
// GOAWAYs at shutdown (stopKubeAPI).
const goAwayGrace = 200 * time.Millisecond

// stopKubeAPI closes the Kubernetes API's listener and tells its HTTP/2
// clients GOAWAY, then ends its watches (their clients watch again from
// their last resourceVersion), lets other requests finish within the
// shutdown timeout and cuts them after it. In that order a client that
// watches again opens a new connection, refused until the next process
// listens, and is answered there; with the watches ended first, it would
// send the new watch on the connection it has, to this process, and be
// sent back with a 429 (kubeapi's answer while stopping), one refusal per
// informer of a warm restart. The order is as good as x/net allows (see
// goAwayGrace).
func (d *Daemon) stopKubeAPI() {
	ctx, cancel := context.WithTimeout(context.Background(), d.shutdownTimeout)
	defer cancel()
	// Shutdown calls its hooks once the listener is closed; x/net's
	// hook, registered beside this one, sends the GOAWAYs.
	closed := make(chan struct{})
	d.kubeSrv.RegisterOnShutdown(func() { close(closed) })
	done := make(chan error, 1)
	go func() { done <- d.kubeSrv.Shutdown(ctx) }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	// The GOAWAYs are written by each connection's own goroutine, which
	// the hooks only ask to (x/net tells nobody when it has): the watches
	// end a moment later, so that a client reads the GOAWAY before its
	// watch's end, as a rule. One that still sends its next watch on the
	// old connection first is answered 429 and retries, as before.
	select {
	case <-time.After(goAwayGrace):
	case <-ctx.Done():
	}
	d.kubeAPI.Stop()
	if err := <-done; err != nil {
		_ = d.kubeSrv.Close()
	}
}
