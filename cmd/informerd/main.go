// Command informerd is a cache-proxy for the Kubernetes API: it watches each
// configured resource once and serves List, Get and Watch over gRPC to many
// clients. main only parses flags, builds the parts and runs them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

type options struct {
	configPath      string
	kubeconfig      string
	grpcAddress     string
	metricsAddress  string
	logFormat       string
	logLevel        string
	shutdownTimeout time.Duration
	maxWatches      int
	maxStreamsConn  uint
	maxRecvMsgBytes int
	validateConfig  string
}

func main() {
	var o options
	flag.StringVar(&o.configPath, "config", "", "path to the YAML configuration (required); see docs/configuration.md")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default: $KUBECONFIG, then in-cluster config")
	flag.StringVar(&o.grpcAddress, "grpc-address", "127.0.0.1:50051", "gRPC listen address: host:port or unix:///path")
	flag.StringVar(&o.metricsAddress, "metrics-address", "127.0.0.1:9402", "HTTP address for /metrics, /healthz and /readyz")
	flag.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	flag.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	flag.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long graceful shutdown may take before streams are cut")
	flag.IntVar(&o.maxWatches, "max-watches", 10000, "most Watch streams open at once, over all clients")
	flag.UintVar(&o.maxStreamsConn, "max-streams-per-connection", 1000, "most concurrent gRPC streams on one client connection")
	flag.IntVar(&o.maxRecvMsgBytes, "max-request-bytes", 1<<20, "largest request message accepted")
	flag.StringVar(&o.validateConfig, "validate-config", "", "check this config file and exit: syntax, and with a reachable cluster (--kubeconfig, $KUBECONFIG or in-cluster) that each resource exists and may be listed and watched; exit status 1 on any problem")
	flag.Parse()

	log, err := newLogger(o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informerd:", err)
		os.Exit(2)
	}
	if o.validateConfig != "" {
		os.Exit(validate(o))
	}
	if err := run1(o, log); err != nil {
		log.Error("informerd stopped", "err", err)
		os.Exit(1)
	}
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

func run1(o options, log *slog.Logger) error {
	if o.configPath == "" {
		return errors.New("--config is required: a YAML file listing the resources to cache (see deploy/config.example.yaml)")
	}
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w (set --kubeconfig or $KUBECONFIG, or run in a pod)", err)
	}
	restConfig.UserAgent = "informerd"
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reach API server at %s: %w", restConfig.Host, err)
	}
	log.Info("connected to API server", "host", restConfig.Host, "version", version.GitVersion, "resources", len(cfg.Resources))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	metrics.NewClientGo(reg).Install()
	caches, err := pipeline.NewSet(cfg, restConfig, log, pipeline.WithIngestObserver(m))
	if err != nil {
		return err
	}

	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(grpcMetrics)

	healthSrv := grpchealth.NewServer()
	healthSrv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	grpcSrv := grpc.NewServer(
		grpc.MaxRecvMsgSize(o.maxRecvMsgBytes),
		grpc.MaxConcurrentStreams(uint32(o.maxStreamsConn)),
		// Clients may ping at most every 10s (also while idle); the server
		// pings idle connections to find clients that vanished.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(grpcMetrics.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(grpcMetrics.StreamServerInterceptor()),
	)
	healthpb.RegisterHealthServer(grpcSrv, healthSrv)
	cacheSrv := server.New(caches, server.Options{MaxWatches: o.maxWatches, Observer: m})
	pb.RegisterCacheServiceServer(grpcSrv, cacheSrv)
	grpcMetrics.InitializeMetrics(grpcSrv)
	reg.MustRegister(metrics.NewCollector(caches, cacheSrv))
	reflection.Register(grpcSrv)

	grpcLis, err := listen(o.grpcAddress)
	if err != nil {
		return err
	}
	metricsLis, err := net.Listen("tcp", o.metricsAddress)
	if err != nil {
		return fmt.Errorf("listen --metrics-address %s: %w", o.metricsAddress, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/healthz", health.Healthz())
	mux.Handle("/readyz", health.Readyz(caches))
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	log.Info("informerd is listening", "grpc", grpcLis.Addr().String(), "metrics", "http://"+metricsLis.Addr().String()+"/metrics")

	var g run.Group
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	g.Add(func() error { return health.SyncGRPC(ctx, caches, healthSrv, log) }, func(error) { cancel() })
	g.Add(func() error { return grpcSrv.Serve(grpcLis) }, func(error) {
		// NOT_SERVING first, then end watch streams with a status that
		// says where to resume, then let unary calls finish.
		healthSrv.Shutdown()
		cacheSrv.Stop()
		stopped := make(chan struct{})
		go func() { grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(o.shutdownTimeout):
			grpcSrv.Stop()
		}
	})
	g.Add(func() error {
		if err := httpSrv.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, func(error) {
		sctx, scancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer scancel()
		_ = httpSrv.Shutdown(sctx)
	})
	// run.Group interrupts actors in the order they were added: health and
	// gRPC first, then metrics, and the caches last, so nothing is served
	// from a cache that has stopped following the API server.
	cacheCtx, stopCaches := context.WithCancel(context.Background())
	g.Add(func() error { return caches.Run(cacheCtx) }, func(error) { stopCaches() })
	err = g.Run()
	log.Info("informerd stopped")
	return err
}

// listen opens a TCP address or, with a unix:// prefix, a Unix socket.
func listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		// A socket left by a previous run blocks Listen; anything else at
		// that path is not ours to delete.
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen --grpc-address %s: %w", addr, err)
		}
		return l, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen --grpc-address %s: %w", addr, err)
	}
	return l, nil
}
