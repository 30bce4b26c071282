// Command informerd is a cache-proxy for the Kubernetes API: it watches each
// configured resource once and serves List, Get and Watch over gRPC to many
// clients. main only parses flags, builds the parts and runs them.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/transport"
)

type options struct {
	configPath      string
	kubeconfig      string
	grpcAddress     string
	metricsAddress  string
	logFormat       string
	logLevel        string
	shutdownTimeout time.Duration
	validateConfig  string
	profiling       bool
	// apiCompression asks the API server for gzip-compressed responses.
	apiCompression bool

	// Transport.
	tls            transport.TLSFiles
	metricsTLS     transport.TLSFiles
	socket         transport.Socket
	allowPlaintext bool

	// Authentication and authorization.
	authMode        string
	audiences       string
	authnTTL        time.Duration
	authzTTL        time.Duration
	authzDeniedTTL  time.Duration
	recheckInterval time.Duration

	// Limits.
	maxWatches      int
	limits          limits.Options
	maxStreamsConn  uint
	maxRecvMsgBytes int
	maxPageSize     int
	keepaliveTime   time.Duration
	keepaliveWait   time.Duration
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
	flag.StringVar(&o.validateConfig, "validate-config", "", "check this config file and exit: syntax, and with a reachable cluster (--kubeconfig, $KUBECONFIG or in-cluster) that each resource exists and may be listed and watched; exit status 1 on any problem")

	flag.BoolVar(&o.apiCompression, "api-server-compression", false, "ask the API server to gzip its responses: less traffic on a slow link to it, more CPU on both sides (it compresses each watch event on its own)")
	flag.BoolVar(&o.profiling, "enable-profiling", false, "serve Go's pprof profiles at /debug/pprof/ on --metrics-address")
	flag.StringVar(&o.tls.CertFile, "tls-cert-file", "", "serve gRPC over TLS with this PEM certificate (chain); reloaded when the file changes")
	flag.StringVar(&o.tls.KeyFile, "tls-key-file", "", "the PEM private key of --tls-cert-file")
	flag.StringVar(&o.tls.ClientCAFile, "tls-client-ca-file", "", "require gRPC clients to present certificates signed by a CA in this PEM bundle (mutual TLS); reloaded when it changes")
	flag.StringVar(&o.metricsTLS.CertFile, "metrics-tls-cert-file", "", "serve /metrics, /healthz and /readyz over TLS with this PEM certificate")
	flag.StringVar(&o.metricsTLS.KeyFile, "metrics-tls-key-file", "", "the PEM private key of --metrics-tls-cert-file")
	var socketMode uint
	flag.UintVar(&socketMode, "unix-socket-mode", 0o660, "file mode of a unix:// --grpc-address socket")
	flag.StringVar(&o.socket.Owner, "unix-socket-owner", "", "owner of a unix:// --grpc-address socket: uid, uid:gid or :gid (numeric)")
	flag.BoolVar(&o.allowPlaintext, "insecure-allow-plaintext", false, "allow plaintext gRPC on a non-loopback TCP address (tokens and objects travel in the clear)")

	flag.StringVar(&o.authMode, "auth-mode", auth.ModeNone, "who may read what: none (Unix socket or loopback only), kubernetes (bearer token, TokenReview + SubjectAccessReview) or mtls (client certificates mapped by mtlsClients in the config)")
	flag.StringVar(&o.audiences, "auth-token-audiences", "informerd", "comma-separated audiences a bearer token must be issued for (--auth-mode=kubernetes)")
	flag.DurationVar(&o.authnTTL, "authentication-cache-ttl", 10*time.Second, "how long a TokenReview result is reused")
	flag.DurationVar(&o.authzTTL, "authorization-cache-ttl", 10*time.Second, "how long an allowed SubjectAccessReview is reused; a revoked permission ends open watches within it plus --auth-recheck-interval")
	flag.DurationVar(&o.authzDeniedTTL, "authorization-denied-cache-ttl", 10*time.Second, "how long a denied SubjectAccessReview is reused")
	flag.DurationVar(&o.recheckInterval, "auth-recheck-interval", time.Second, "how often an open Watch re-checks its caller's token and permission (answered from the caches above)")

	flag.IntVar(&o.maxWatches, "max-watches", 10000, "most Watch streams open at once, over all clients")
	flag.IntVar(&o.limits.MaxWatchesPerIdentity, limits.MaxWatchesPerIdentity, limits.DefaultMaxWatchesPerIdentity, "most Watch streams one client identity may have open (with --auth-mode none, each connection is an identity)")
	flag.Float64Var(&o.limits.WatchRate, limits.WatchRate, limits.DefaultWatchRate, "new Watch calls per second one client identity may start (token bucket); calls past it wait their turn (--max-queue-wait)")
	flag.IntVar(&o.limits.WatchBurst, limits.WatchBurst, limits.DefaultWatchBurst, "new Watch calls one client identity may start at once")
	flag.Float64Var(&o.limits.ListRate, limits.ListRate, limits.DefaultListRate, "new List calls (first pages) per second one client identity may start (token bucket); calls past it wait their turn (--max-queue-wait)")
	flag.IntVar(&o.limits.ListBurst, limits.ListBurst, limits.DefaultListBurst, "new List calls one client identity may start at once")
	flag.DurationVar(&o.limits.MaxQueueWait, limits.MaxQueueWait, limits.DefaultMaxQueueWait, "longest a Watch or List call past its identity's rate waits for its turn; one whose turn is further off, or after its deadline, is refused at once with RESOURCE_EXHAUSTED and the delay as RetryInfo")
	flag.IntVar(&o.limits.MaxQueuedPerIdentity, limits.MaxQueuedPerIdentity, limits.DefaultMaxQueuedPerIdentity, "most calls of one client identity waiting for their turn at once")
	flag.IntVar(&o.limits.MaxQueued, limits.MaxQueued, limits.DefaultMaxQueued, "most calls waiting for their turn at once, over all clients")
	flag.IntVar(&o.limits.MaxIdentities, limits.MaxIdentities, limits.DefaultMaxIdentities, "most client identities tracked for the per-identity limits")
	flag.UintVar(&o.maxStreamsConn, "max-streams-per-connection", 1000, "most concurrent gRPC streams on one client connection")
	flag.IntVar(&o.maxRecvMsgBytes, "max-request-bytes", 1<<20, "largest request message accepted")
	flag.IntVar(&o.maxPageSize, "max-page-size", 5000, "most objects in one List page (a larger limit is clamped)")
	flag.DurationVar(&o.keepaliveTime, "keepalive-time", 2*time.Minute, "ping a client connection idle this long, to find clients that vanished without closing")
	flag.DurationVar(&o.keepaliveWait, "keepalive-timeout", 20*time.Second, "close a connection whose ping is not answered within this, ending its streams")
	flag.Parse()
	o.socket.Mode = os.FileMode(socketMode)

	log, err := newLogger(o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "informerd:", err)
		os.Exit(2)
	}
	if o.validateConfig != "" {
		os.Exit(validate(o))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run1(ctx, o, log); err != nil {
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

// run1 runs informerd until ctx ends (SIGTERM), then shuts down in order.
func run1(ctx context.Context, o options, log *slog.Logger) error {
	if o.configPath == "" {
		return errors.New("--config is required: a YAML file listing the resources to cache (see deploy/config.example.yaml)")
	}
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return err
	}
	warning, err := transport.Security{
		Address: o.grpcAddress, TLS: o.tls.CertFile != "", ClientCA: o.tls.ClientCAFile != "",
		AuthMode: o.authMode, AllowPlaintext: o.allowPlaintext,
	}.Check()
	if err != nil {
		return err
	}
	if warning != "" {
		log.Warn(warning)
	}
	if o.authMode == auth.ModeMTLS && len(cfg.MTLSClients) == 0 {
		return fmt.Errorf("--auth-mode=mtls: config %s has no mtlsClients, so every client would be refused; map certificate identities to resources there (docs/configuration.md)", o.configPath)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w (set --kubeconfig or $KUBECONFIG, or run in a pod)", err)
	}
	restConfig.UserAgent = "informerd"
	// Go's transport asks for gzip unless told not to. kube-apiserver then
	// compresses large lists and whole watch-list streams, each event on
	// its own flush, and informerd spends more CPU decompressing a watch
	// than framing it. Next to the API server (in the cluster) bandwidth is
	// cheap and CPU is not.
	restConfig.DisableCompression = !o.apiCompression
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
	reg.MustRegister(collectors.NewGoCollector(
		// The heap live after the last GC: what the cache really holds.
		collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}),
	), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	metrics.NewClientGo(reg).Install()
	caches, err := pipeline.NewSet(cfg, restConfig, log, pipeline.WithIngestObserver(m))
	if err != nil {
		return err
	}

	var authn auth.Authenticator = auth.None{}
	var authz auth.Authorizer = auth.None{}
	switch o.authMode {
	case auth.ModeKubernetes:
		k, err := auth.NewKubernetes(restConfig, auth.KubernetesOptions{
			Audiences:         strings.Split(o.audiences, ","),
			AuthenticationTTL: o.authnTTL,
			AuthorizedTTL:     o.authzTTL,
			UnauthorizedTTL:   o.authzDeniedTTL,
			Registerer:        reg,
		})
		if err != nil {
			return err
		}
		authn, authz = k, k
	case auth.ModeMTLS:
		mt := auth.NewMTLS(cfg.MTLSClients)
		authn, authz = mt, mt
	}
	var grpcTLS, metricsTLS *transport.TLS
	var creds credentials.TransportCredentials
	if o.tls.Enabled() {
		if grpcTLS, err = transport.NewTLS("grpc", o.tls); err != nil {
			return fmt.Errorf("--tls-cert-file/--tls-key-file/--tls-client-ca-file: %w", err)
		}
		creds = credentials.NewTLS(grpcTLS.Config())
	}
	if o.metricsTLS.Enabled() {
		if metricsTLS, err = transport.NewTLS("metrics", o.metricsTLS); err != nil {
			return fmt.Errorf("--metrics-tls-cert-file/--metrics-tls-key-file: %w", err)
		}
	}

	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(grpcMetrics)
	o.limits.Waited = m.ObserveLimitWait
	cacheSrv := server.New(caches, server.Options{
		MaxWatches:      o.maxWatches,
		MaxPageSize:     o.maxPageSize,
		Authenticator:   authn,
		Authorizer:      authz,
		RecheckInterval: o.recheckInterval,
		Limits:          limits.New(o.limits),
		Observer:        m,
	})
	grpcSrv := cacheSrv.NewGRPC(server.GRPCOptions{
		Creds:                   creds,
		MaxRequestBytes:         o.maxRecvMsgBytes,
		MaxStreamsPerConnection: uint32(o.maxStreamsConn),
		KeepaliveTime:           o.keepaliveTime,
		KeepaliveTimeout:        o.keepaliveWait,
		Unary:                   []grpc.UnaryServerInterceptor{grpcMetrics.UnaryServerInterceptor()},
		Stream:                  []grpc.StreamServerInterceptor{grpcMetrics.StreamServerInterceptor()},
	})
	healthSrv := grpchealth.NewServer()
	healthSrv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	cacheSrv.Register(grpcSrv, &healthpb.Health_ServiceDesc, healthSrv)
	grpcMetrics.InitializeMetrics(grpcSrv)
	reg.MustRegister(metrics.NewCollector(caches))
	reflection.Register(grpcSrv)

	grpcLis, err := transport.Listen("--grpc-address", o.grpcAddress, o.socket)
	if err != nil {
		return err
	}
	metricsLis, err := transport.Listen("--metrics-address", o.metricsAddress, transport.Socket{})
	if err != nil {
		return err
	}
	scheme := "http"
	if metricsTLS != nil {
		metricsLis, scheme = tls.NewListener(metricsLis, metricsTLS.Config()), "https"
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/healthz", health.Healthz())
	mux.Handle("/readyz", health.Readyz(caches))
	if o.profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	log.Info("informerd is listening", "grpc", grpcLis.Addr().String(), "tls", grpcTLS != nil, "auth", o.authMode,
		"metrics", scheme+"://"+metricsLis.Addr().String()+"/metrics")

	var g run.Group
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Add(func() error { <-ctx.Done(); return nil }, func(error) { cancel() })
	for _, t := range []*transport.TLS{grpcTLS, metricsTLS} {
		if t != nil {
			g.Add(func() error { return t.Run(ctx) }, func(error) { cancel() })
		}
	}
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
