package daemon

import (
	"net/http"
	"net/http/pprof"
	"strings"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/audit"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/health"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/reflector"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/upstream"
)

// wire builds the caches, the CacheService and the gRPC server with health
// and reflection, and registers their metrics: every call into the
// pipeline, server, health and metrics packages is here.
func (d *Daemon) wire(o Options, cfg *config.Config, restConfig *rest.Config, creds credentials.TransportCredentials) error {
	m := metrics.New(d.reg)
	d.clientGo = metrics.NewClientGo(d.reg)
	var err error
	popts := []pipeline.Option{pipeline.WithIngestObserver(m), pipeline.WithClientOptions(reflector.ClientOptions{WatchHTTP2: o.APIServerWatchHTTP2}), pipeline.WithMaxProjections(o.MaxProjections), pipeline.WithConsistencyChecks(o.ConsistencyCheck), pipeline.WithCompression(pipeline.CompressionOptions{Mode: o.CacheCompression, MinObjects: o.CacheCompressionMinObjects})}
	if d.state != nil {
		popts = append(popts, pipeline.WithState(d.state))
	}
	if d.upstream != nil {
		d.caches, err = pipeline.NewSetFrom(cfg, upstream.New(d.upstream, o.Upstream.Address), d.log, popts...)
	} else {
		d.caches, err = pipeline.NewSet(cfg, restConfig, d.log, popts...)
	}
	if err != nil {
		return err
	}
	sopts, err := o.serverOptions(cfg, restConfig, d.reg, m)
	if err != nil {
		return err
	}
	if sopts.Schemas == nil && d.upstream == nil {
		if sopts.Schemas, err = newSchemas(restConfig, d.log); err != nil {
			return err
		}
	}
	d.cacheSrv = server.New(d.caches, sopts)

	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	d.reg.MustRegister(grpcMetrics)
	d.grpcSrv = d.cacheSrv.NewGRPC(server.GRPCOptions{
		Creds:                   creds,
		MaxRequestBytes:         o.MaxRequestBytes,
		MaxStreamsPerConnection: uint32(o.MaxStreamsPerConnection),
		KeepaliveTime:           o.KeepaliveTime,
		KeepaliveTimeout:        o.KeepaliveTimeout,
		Unary:                   []grpc.UnaryServerInterceptor{grpcMetrics.UnaryServerInterceptor()},
		Stream:                  []grpc.StreamServerInterceptor{grpcMetrics.StreamServerInterceptor()},
	})
	d.healthSrv = grpchealth.NewServer()
	d.healthSrv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	d.cacheSrv.Register(d.grpcSrv, &healthpb.Health_ServiceDesc, d.healthSrv)
	grpcMetrics.InitializeMetrics(d.grpcSrv)
	d.reg.MustRegister(metrics.NewCollector(d.caches))
	reflection.Register(d.grpcSrv)
	if o.KubeAPIAddress == "" {
		return nil
	}
	kopts := kubeapi.Options{
		Caches:             d.caches,
		Upstream:           restConfig,
		Authenticator:      sopts.Authenticator,
		Authorizer:         sopts.Authorizer,
		Limits:             sopts.Limits,
		MaxWatches:         sopts.MaxWatches,
		MaxPageSize:        sopts.MaxPageSize,
		ConsistentWait:     o.ConsistentReadTimeout,
		ContinueLifetime:   o.ContinueLifetime,
		DisableCompression: !o.KubeAPICompression,
		HTTP2MaxStreams:    o.KubeAPIHTTP2MaxStreams,
		ConsistentFallback: o.ConsistentReadFallback,
		Observer:           metrics.NewKubeAPI(d.reg, m),
		Log:                d.log.With("listener", "kube-api"),
	}
	if k, ok := sopts.Authorizer.(*auth.Kubernetes); ok {
		kopts.Impersonation = k.Reviewer()
	}
	if d.auditor, err = audit.New(o.Audit); err != nil {
		return err
	}
	if d.auditor != nil {
		kopts.AuditSink, kopts.AuditPolicy = d.auditor.Sink(), d.auditor.Policy()
	}
	d.kubeAPI, err = kubeapi.New(kopts)
	return err
}

// serverOptions are the CacheService's options: the injected ones, or
// those of the auth and limit flags.
func (o Options) serverOptions(cfg *config.Config, restConfig *rest.Config, reg prometheus.Registerer, m *metrics.Metrics) (server.Options, error) {
	if o.Server != nil {
		s := *o.Server
		if s.Observer == nil {
			s.Observer = m
		}
		return s, nil
	}
	var authn auth.Authenticator = auth.None{}
	var authz auth.Authorizer = auth.None{}
	switch o.AuthMode {
	case auth.ModeKubernetes:
		nodes, err := o.nodeBinding(cfg)
		if err != nil {
			return server.Options{}, err
		}
		k, err := auth.NewKubernetes(restConfig, auth.KubernetesOptions{
			Audiences:         strings.Split(o.TokenAudiences, ","),
			AuthenticationTTL: o.AuthenticationCacheTTL,
			AuthorizedTTL:     o.AuthorizationCacheTTL,
			UnauthorizedTTL:   o.AuthorizationDeniedCacheTTL,
			Registerer:        reg,
			NodeBinding:       nodes,
		})
		if err != nil {
			return server.Options{}, err
		}
		authn, authz = k, k
	case auth.ModeMTLS:
		mt := auth.NewMTLS(cfg.MTLSClients)
		authn, authz = mt, mt
	}
	lo := o.Limits
	lo.Waited = m.ObserveLimitWait
	return server.Options{
		MaxWatches:      o.MaxWatches,
		MaxPageSize:     o.MaxPageSize,
		Authenticator:   authn,
		Authorizer:      authz,
		RecheckInterval: o.RecheckInterval,
		Limits:          limits.New(lo),
		Observer:        m,
	}, nil
}

// httpHandler serves /metrics, /healthz, /readyz and, with profiling,
// /debug/pprof/.
func (d *Daemon) httpHandler(profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.Handle("/healthz", health.Healthz())
	mux.Handle("/readyz", health.Readyz(d.caches))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
