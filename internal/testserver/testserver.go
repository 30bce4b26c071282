// Package testserver runs informerd in the test process — built and stopped
// by the daemon package as the informerd binary is, with the gRPC
// CacheService on a loopback TCP port and /metrics and /readyz on another —
// for tests of clients. A test can stop it and start it again on the same
// address, as a restarted informerd would be.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// Options tune Start. The zero value serves plaintext gRPC to everyone,
// with no per-identity limits.
type Options struct {
	// Metrics sets MetricsURL, where informerd serves /metrics, /healthz
	// and /readyz on loopback.
	Metrics bool
	// Server are the CacheService options.
	Server server.Options
	// Creds secure the gRPC listener (TLS); nil serves plaintext.
	Creds credentials.TransportCredentials
}

// Server is a running informerd. Its methods may be called from one test
// goroutine at a time.
type Server struct {
	// Addr is the gRPC address, host:port; it stays the same across Restart.
	Addr string
	// MetricsURL is http://host:port of /metrics and /readyz, when
	// Options.Metrics is set; it changes on Restart.
	MetricsURL string

	t       testing.TB
	opts    daemon.Options
	metrics bool

	mu      sync.Mutex
	d       *daemon.Daemon
	stopped bool
	stop    func()
}

// Start runs informerd for the config yaml against the API server of
// restConfig until the test ends.
func Start(t testing.TB, restConfig *rest.Config, yaml string, opts Options) *Server {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	o := daemon.NewOptions()
	o.RestConfig, o.Config, o.Creds = restConfig, c, opts.Creds
	o.Server = &opts.Server
	o.GRPCAddress, o.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
	s := &Server{t: t, opts: o, metrics: opts.Metrics, stopped: true}
	s.start()
	s.Addr = s.d.GRPCAddr()
	// Later starts listen on the same gRPC address.
	s.opts.GRPCAddress = s.Addr
	t.Cleanup(s.Stop)
	return s
}

// Set returns the caches of the running informerd.
func (s *Server) Set() *pipeline.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.Caches()
}

// CacheServer returns the CacheService of the running informerd.
func (s *Server) CacheServer() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.CacheServer()
}

func (s *Server) start() {
	s.t.Helper()
	d, err := daemon.New(s.opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			s.t.Errorf("informerd: %v", err)
		}
	}()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.d, s.stopped = d, false
	if s.metrics {
		s.MetricsURL = d.MetricsURL()
	}
	s.stop = func() { cancel(); <-done }
}

// Stop stops informerd as SIGTERM would: gRPC health NOT_SERVING, every
// Watch stream ends with UNAVAILABLE (SHUTTING_DOWN), calls finish and
// connections close, the caches stop last. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	stop, stopped := s.stop, s.stopped
	s.stopped = true
	s.mu.Unlock()
	if !stopped {
		stop()
	}
}

// Restart stops informerd and starts a new one, with empty caches that
// list the API server again, on the same gRPC address.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.StartAgain()
}

// StartAgain starts a stopped informerd again on the same gRPC address.
func (s *Server) StartAgain() {
	s.t.Helper()
	s.start()
}
