// Package testserver runs informerd in the test process — the caches of a
// config, the gRPC CacheService on a loopback TCP port, and optionally
// /metrics and /readyz — for tests of clients. A test can stop it and start
// it again on the same address, as a restarted informerd would be.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// Options tune Start. The zero value serves gRPC only.
type Options struct {
	// Metrics also serves /metrics, /healthz and /readyz on a loopback
	// HTTP port (MetricsURL).
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

	t    testing.TB
	rest *rest.Config
	cfg  *config.Config
	opts Options

	mu      sync.Mutex
	set     *pipeline.Set
	srv     *server.Server
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
	s := &Server{t: t, rest: restConfig, cfg: c, opts: opts, stopped: true}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = lis.Addr().String()
	s.start(lis)
	t.Cleanup(s.Stop)
	return s
}

// Set returns the caches of the running informerd.
func (s *Server) Set() *pipeline.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// CacheServer returns the CacheService of the running informerd.
func (s *Server) CacheServer() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

func (s *Server) start(lis net.Listener) {
	t := s.t
	// With metrics, the instruments are wired as informerd wires them.
	var reg *prometheus.Registry
	var popts []pipeline.Option
	sopts := s.opts.Server
	if s.opts.Metrics {
		reg = prometheus.NewRegistry()
		m := metrics.New(reg)
		popts = append(popts, pipeline.WithIngestObserver(m))
		sopts.Observer = m
	}
	set, err := pipeline.NewSet(s.cfg, s.rest, slog.New(slog.NewTextHandler(io.Discard, nil)), popts...)
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := set.Run(ctx); err != nil {
			t.Errorf("caches: %v", err)
		}
	})
	srv := server.New(set, sopts)
	gs := srv.NewGRPC(server.GRPCOptions{Creds: s.opts.Creds})
	wg.Go(func() { _ = gs.Serve(lis) })

	var hs *httptest.Server
	if reg != nil {
		reg.MustRegister(metrics.NewCollector(set))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.Handle("/healthz", health.Healthz())
		mux.Handle("/readyz", health.Readyz(set))
		hs = httptest.NewServer(mux)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.srv, s.stopped = set, srv, false
	if hs != nil {
		s.MetricsURL = hs.URL
	}
	// Stop in informerd's order: end the watch streams with a status,
	// close the connections, then stop the caches.
	s.stop = func() {
		if hs != nil {
			hs.Close()
		}
		srv.Stop()
		gs.Stop()
		cancel()
		wg.Wait()
	}
}

// Stop stops informerd as SIGTERM would: every Watch stream ends with
// UNAVAILABLE (SHUTTING_DOWN), connections close, the caches stop. It is
// idempotent.
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
	lis, err := net.Listen("tcp", s.Addr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.Addr, err)
	}
	s.start(lis)
}
