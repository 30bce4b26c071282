package daemon

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/audit"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/state"
	"github.com/informerd/informerd/internal/transport"
	"github.com/informerd/informerd/pkg/client"
)

// Defaults of the flags no other package owns. The others come from the
// package that uses the value: server, limits, auth, transport.
const (
	DefaultGRPCAddress     = "127.0.0.1:50051"
	DefaultMetricsAddress  = "127.0.0.1:9402"
	DefaultLogFormat       = "text"
	DefaultLogLevel        = "info"
	DefaultShutdownTimeout = 10 * time.Second
)

// Options are informerd's settings: a field for each flag, and a few parts
// that a test or a program embedding informerd passes in place of the flags
// that name them. NewOptions returns the defaults.
type Options struct {
	// ConfigPath is the YAML configuration (--config).
	ConfigPath string
	// Kubeconfig names the cluster (--kubeconfig); empty means
	// $KUBECONFIG, then the in-cluster config.
	Kubeconfig string
	// Upstream, when its Address is set, is the informerd every resource
	// is taken from instead of the API server (--upstream-informerd and
	// the --upstream-* flags): a node-local tier fed by a cluster tier.
	// Address may list several replicas, comma-separated, or name a
	// headless Service that resolves to them.
	Upstream client.Config
	// GRPCAddress and MetricsAddress are where informerd listens
	// (--grpc-address, --metrics-address). Port 0 picks a free port;
	// Daemon.GRPCAddr and Daemon.MetricsURL tell which.
	GRPCAddress, MetricsAddress string
	// LogFormat and LogLevel shape the log (--log-format, --log-level); the
	// caller of New builds the logger from them.
	LogFormat, LogLevel string
	// ShutdownTimeout bounds how long Run waits for open calls once it is
	// stopped (--shutdown-timeout).
	ShutdownTimeout time.Duration
	// ValidateConfig, when set, asks main to check this file and exit
	// (--validate-config); New ignores it.
	ValidateConfig string
	// APIServerCompression asks the API server for gzip-compressed
	// responses (--api-server-compression).
	APIServerCompression bool
	// APIServerWatchHTTP2 sends the upstream watches over the HTTP/2
	// connection the lists share (--api-server-watch-http2) instead of an
	// HTTP/1.1 connection per watch.
	APIServerWatchHTTP2 bool
	// Profiling serves pprof on the metrics address (--enable-profiling).
	Profiling bool
	// KubeAPIAddress, when set, serves the Kubernetes API there
	// (--kube-api-address): host:port or unix:///path, with the gRPC
	// listener's TLS, socket and auth settings.
	KubeAPIAddress string
	// StateDir, when set, keeps every resource's cache there (--state-dir),
	// written at most StateFlushInterval or StateFlushEvents changes behind
	// the cache (--state-flush-interval, --state-flush-events).
	StateDir           string
	StateFlushInterval time.Duration
	StateFlushEvents   int
	// ConsistencyCheck configures the integrity checks of the caches
	// against the API server (--consistency-check-*).
	ConsistencyCheck pipeline.CheckOptions
	// CacheCompression is --cache-compression: pipeline.CompressionOff or
	// CompressionCold.
	CacheCompression string
	// CacheCompressionMinObjects is --cache-compression-min-objects: a
	// cache with fewer objects is not compressed.
	CacheCompressionMinObjects int
	// Audit are the --audit-* flags: audit events for the Kubernetes API
	// reads informerd answers itself.
	Audit audit.Options
	// MemoryLimitRatio is the share of the cgroup's memory limit set as
	// the Go runtime's soft memory limit (--memory-limit-ratio; 0: off);
	// GCPercent is the runtime's GOGC (--gc-percent); a GOMEMLIMIT or
	// GOGC in the environment wins. ReturnMemory returns the memory a
	// full list leaves to the OS once it is cached (--return-memory).
	MemoryLimitRatio float64
	GCPercent        int
	ReturnMemory     bool

	// TLS and MetricsTLS are the PEM files of the gRPC and the metrics
	// listeners (--tls-*, --metrics-tls-*).
	TLS, MetricsTLS transport.TLSFiles
	// UnixSocketMode and UnixSocketOwner shape a unix:// GRPCAddress
	// (--unix-socket-mode, --unix-socket-owner).
	UnixSocketMode  uint
	UnixSocketOwner string
	// UnixSocketAllowedUIDs, comma-separated, are the only users whose
	// processes may connect to a unix:// listener (SO_PEERCRED;
	// --unix-socket-allowed-uids); empty: anyone the file mode lets in.
	UnixSocketAllowedUIDs string
	// AllowPlaintext permits plaintext gRPC on a non-loopback address
	// (--insecure-allow-plaintext).
	AllowPlaintext bool

	// AuthMode is auth.ModeNone, ModeKubernetes or ModeMTLS (--auth-mode).
	AuthMode string
	// TokenAudiences is comma-separated (--auth-token-audiences).
	TokenAudiences string
	// NodeBoundServiceAccounts, "namespace:name,...", are confined to the
	// node their token is bound to (--node-bound-service-accounts).
	NodeBoundServiceAccounts string
	// The TTLs of the review caches of --auth-mode=kubernetes.
	AuthenticationCacheTTL, AuthorizationCacheTTL, AuthorizationDeniedCacheTTL time.Duration
	// RecheckInterval is how often an open Watch re-checks its caller
	// (--auth-recheck-interval).
	RecheckInterval time.Duration

	// MaxWatches bounds the Watch streams over all clients (--max-watches).
	MaxWatches int
	// MaxProjections bounds the distinct field masks in use on one
	// resource's Watch streams (--max-projections).
	MaxProjections int
	// Limits are the per-identity limits (--max-watches-per-identity,
	// --watch-rate, ...). Their Waited hook is set by New.
	Limits limits.Options
	// MaxStreamsPerConnection, MaxRequestBytes, MaxPageSize, KeepaliveTime
	// and KeepaliveTimeout are the flags of the same names.
	MaxStreamsPerConnection         uint
	MaxRequestBytes                 int
	MaxPageSize                     int
	KeepaliveTime, KeepaliveTimeout time.Duration
	// ConsistentReadTimeout bounds how long a Kubernetes API read waits
	// for the cache to reach the resourceVersion it needs
	// (--consistent-read-timeout).
	ConsistentReadTimeout time.Duration
	// ContinueLifetime is how long a Kubernetes API list's continue
	// tokens are valid (--continue-lifetime).
	ContinueLifetime time.Duration
	// ConsistentReadFallback is what a consistent read gets when the cache
	// cannot serve it in time (--consistent-read-fallback): forward or
	// refuse.
	ConsistentReadFallback string
	// KubeAPISelfSignedCA, when set, serves the listeners with a loopback
	// certificate informerd issues and renews itself, from a CA of its own
	// published at this path (--kube-api-tls-self-signed): a sidecar's
	// TLS without cert-manager.
	KubeAPISelfSignedCA string
	// KubeAPICompression gzips large Kubernetes API answers and WatchList
	// streams for clients that accept gzip, as the API server does
	// (--kube-api-compression).
	KubeAPICompression bool
	// KubeAPIHTTP2MaxStreams bounds the concurrent streams of one HTTP/2
	// connection to the Kubernetes API (--kube-api-http2-max-streams); 0
	// allows every watch on one.
	KubeAPIHTTP2MaxStreams int

	// Config, when set, is used instead of loading ConfigPath.
	Config *config.Config
	// RestConfig, when set, is used instead of loading Kubeconfig. New
	// works on a copy.
	RestConfig *rest.Config
	// Creds, when set, secure the gRPC listener instead of the TLS files.
	Creds credentials.TransportCredentials
	// Server, when set, are the CacheService options instead of those the
	// flags build (auth mode, limits, --max-watches, --max-page-size,
	// --auth-recheck-interval); a nil Observer is given informerd's
	// metrics.
	Server *server.Options
}

// NewOptions returns informerd's defaults, each taken from the package that
// owns it.
func NewOptions() Options {
	return Options{
		GRPCAddress:        DefaultGRPCAddress,
		MetricsAddress:     DefaultMetricsAddress,
		LogFormat:          DefaultLogFormat,
		LogLevel:           DefaultLogLevel,
		ShutdownTimeout:    DefaultShutdownTimeout,
		Audit:              audit.NewOptions(),
		StateFlushInterval: state.DefaultFlushInterval,
		StateFlushEvents:   state.DefaultFlushEvents,
		ConsistencyCheck: pipeline.CheckOptions{
			Interval: pipeline.DefaultCheckInterval, PageSize: pipeline.DefaultCheckPageSize, PagePause: pipeline.DefaultCheckPagePause,
		},
		CacheCompression:            pipeline.CompressionCold,
		CacheCompressionMinObjects:  pipeline.DefaultCompressionMinObjects,
		MemoryLimitRatio:            DefaultMemoryLimitRatio,
		GCPercent:                   DefaultGCPercent,
		ReturnMemory:                DefaultReturnMemory,
		UnixSocketMode:              uint(transport.DefaultSocketMode),
		AuthMode:                    auth.ModeNone,
		TokenAudiences:              auth.DefaultAudience,
		AuthenticationCacheTTL:      auth.DefaultCacheTTL,
		AuthorizationCacheTTL:       auth.DefaultCacheTTL,
		AuthorizationDeniedCacheTTL: auth.DefaultCacheTTL,
		RecheckInterval:             server.DefaultRecheckInterval,
		MaxWatches:                  server.DefaultMaxWatches,
		MaxProjections:              fanout.DefaultMaxProjections,
		Limits: limits.Options{
			MaxWatchesPerIdentity: limits.DefaultMaxWatchesPerIdentity,
			WatchRate:             limits.DefaultWatchRate,
			WatchBurst:            limits.DefaultWatchBurst,
			ListRate:              limits.DefaultListRate,
			ListBurst:             limits.DefaultListBurst,
			MaxQueueWait:          limits.DefaultMaxQueueWait,
			MaxQueuedPerIdentity:  limits.DefaultMaxQueuedPerIdentity,
			MaxQueued:             limits.DefaultMaxQueued,
			MaxIdentities:         limits.DefaultMaxIdentities,
		},
		MaxStreamsPerConnection: server.DefaultMaxStreamsPerConnection,
		MaxRequestBytes:         server.DefaultMaxRequestBytes,
		MaxPageSize:             server.DefaultMaxPageSize,
		KeepaliveTime:           server.DefaultKeepaliveTime,
		KeepaliveTimeout:        server.DefaultKeepaliveTimeout,
		ConsistentReadTimeout:   kubeapi.DefaultConsistentWait,
		ContinueLifetime:        kubeapi.DefaultContinueLifetime,
		KubeAPICompression:      true,
		ConsistentReadFallback:  kubeapi.FallbackForward,
	}
}

// AddFlags registers every flag of informerd on fs, each with o's current
// value as its default: call it on NewOptions().
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigPath, "config", o.ConfigPath, "path to the YAML configuration (required); see docs/configuration.md")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; default: $KUBECONFIG, then in-cluster config")
	o.addUpstreamFlags(fs)
	fs.StringVar(&o.GRPCAddress, "grpc-address", o.GRPCAddress, "gRPC listen address: host:port or unix:///path")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "HTTP address for /metrics, /healthz and /readyz")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long graceful shutdown may take before streams are cut")
	fs.StringVar(&o.ValidateConfig, "validate-config", o.ValidateConfig, "check this config file and exit: syntax, and with a reachable cluster (--kubeconfig, $KUBECONFIG or in-cluster) that each resource exists and may be listed and watched; exit status 1 on any problem")

	fs.BoolVar(&o.APIServerCompression, "api-server-compression", o.APIServerCompression, "ask the API server to gzip its responses: less traffic on a slow link to it, more CPU on both sides (it compresses each watch event on its own)")
	fs.BoolVar(&o.APIServerWatchHTTP2, "api-server-watch-http2", o.APIServerWatchHTTP2, "watch the API server over the HTTP/2 connection lists share, as client-go does; by default each watched resource has an HTTP/1.1 connection of its own, which costs less CPU per event (docs/configuration.md)")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "keep every resource's cache in this directory, so that a restart serves at once, resumes the upstream watch from where it stopped and keeps clients' resourceVersions valid (docs/reliability.md); empty: off")
	fs.DurationVar(&o.StateFlushInterval, "state-flush-interval", o.StateFlushInterval, "with --state-dir: the longest a cached change waits before it is written")
	fs.IntVar(&o.StateFlushEvents, "state-flush-events", o.StateFlushEvents, "with --state-dir: the most cached changes that wait before a write starts")
	fs.DurationVar(&o.ConsistencyCheck.Interval, "consistency-check-interval", o.ConsistencyCheck.Interval, "check each cache against the API server this often (with 10% jitter; 0: off): the API server's list at the cache's own resourceVersion (resourceVersionMatch=Exact, paged, metadata only) is compared key by key and resourceVersion by resourceVersion; a mismatch is logged, counted (informerd_cache_consistency_checks_total), shown on /readyz and repaired by listing again. Also run soon after a restored cache is confirmed")
	fs.Int64Var(&o.ConsistencyCheck.PageSize, "consistency-check-page-size", o.ConsistencyCheck.PageSize, "objects in each page of an integrity check's list")
	fs.DurationVar(&o.ConsistencyCheck.PagePause, "consistency-check-page-interval", o.ConsistencyCheck.PagePause, "pause between two pages of an integrity check's list, to spread its cost on the API server")
	fs.BoolVar(&o.Profiling, "enable-profiling", o.Profiling, "serve Go's pprof profiles at /debug/pprof/ on --metrics-address")
	fs.Float64Var(&o.MemoryLimitRatio, "memory-limit-ratio", o.MemoryLimitRatio, "set the Go runtime's soft memory limit to this share of the container's cgroup memory limit (cgroup v2 memory.max, v1 memory.limit_in_bytes), so the collector works harder before the OOM killer acts; 0: off. A GOMEMLIMIT in the environment wins")
	fs.StringVar(&o.CacheCompression, "cache-compression", o.CacheCompression, "how the caches hold their objects: cold (an object no event of the history window holds any more is compressed with a zstd dictionary trained on the resource's own objects; recently changed ones stay as they are, so watches never decompress; a List of cold objects decompresses each) or off (every object's JSON as it is). Memory per object and resource on /readyz and in informerd_cache_object_bytes (docs/benchmarks/compression.md)")
	fs.IntVar(&o.CacheCompressionMinObjects, "cache-compression-min-objects", o.CacheCompressionMinObjects, "with --cache-compression=cold, compress a resource's cache only once it holds this many objects: below, its dictionary and encoder would cost more than they save")
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent, "the Go runtime's GOGC: how far, in percent of the live heap, the heap grows between collections; lower keeps RSS nearer the cache's size for more collector CPU. A GOGC in the environment wins")
	fs.BoolVar(&o.ReturnMemory, "return-memory", o.ReturnMemory, "after every resource's first sync, after each relist, once compressing cold objects (--cache-compression) has freed a quarter of the cached bytes, and after each whole-state write of 16 MiB or more (--state-dir), collect garbage and return the free memory to the OS once (debug.FreeOSMemory), so RSS drops from the list's peak to the cache's size")
	o.addTransportFlags(fs)
	o.addAuthFlags(fs)
	o.Audit.AddFlags(fs)
	o.addLimitFlags(fs)
}

func (o *Options) addUpstreamFlags(fs *flag.FlagSet) {
	u := &o.Upstream
	fs.StringVar(&u.Address, "upstream-informerd", u.Address, "take every resource from this informerd instead of the API server: host:port, several replicas comma-separated (a:50051,b:50051), a headless Service's name that resolves to them, or unix:///path; a leaf fails over between them, resuming from its resourceVersion (docs/deploy.md)")
	fs.StringVar(&u.CAFile, "upstream-ca-file", u.CAFile, "PEM bundle to verify the upstream informerd's serving certificate; turns TLS on")
	fs.StringVar(&u.ServerName, "upstream-server-name", u.ServerName, "name to check the upstream informerd's certificate against, instead of the address's host")
	fs.StringVar(&u.CertFile, "upstream-cert-file", u.CertFile, "client certificate for an upstream informerd with --auth-mode=mtls; read at every handshake, so a rotated one is used")
	fs.StringVar(&u.KeyFile, "upstream-key-file", u.KeyFile, "the PEM private key of --upstream-cert-file")
	fs.StringVar(&u.TokenFile, "upstream-token-file", u.TokenFile, "bearer token for an upstream informerd with --auth-mode=kubernetes, e.g. a projected ServiceAccount token for the audience informerd; read again when the file changes")
	fs.BoolVar(&u.Insecure, "upstream-insecure", u.Insecure, "allow plaintext to an upstream informerd that is neither a Unix socket nor loopback (it must run with --insecure-allow-plaintext); tests only")
}

func (o *Options) addTransportFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.KubeAPIAddress, "kube-api-address", o.KubeAPIAddress, "also serve the Kubernetes API here (host:port or unix:///path), so unmodified Kubernetes clients read from the cache: reads of cached resources answered from it, everything else forwarded to the API server with the caller's own token. Same TLS, socket and auth flags as gRPC; empty: off")
	fs.StringVar(&o.TLS.CertFile, "tls-cert-file", o.TLS.CertFile, "serve gRPC over TLS with this PEM certificate (chain); reloaded when the file changes")
	fs.StringVar(&o.TLS.KeyFile, "tls-key-file", o.TLS.KeyFile, "the PEM private key of --tls-cert-file")
	fs.StringVar(&o.TLS.ClientCAFile, "tls-client-ca-file", o.TLS.ClientCAFile, "require gRPC clients to present certificates signed by a CA in this PEM bundle (mutual TLS); reloaded when it changes")
	fs.StringVar(&o.MetricsTLS.CertFile, "metrics-tls-cert-file", o.MetricsTLS.CertFile, "serve /metrics, /healthz and /readyz over TLS with this PEM certificate")
	fs.StringVar(&o.MetricsTLS.KeyFile, "metrics-tls-key-file", o.MetricsTLS.KeyFile, "the PEM private key of --metrics-tls-cert-file")
	fs.UintVar(&o.UnixSocketMode, "unix-socket-mode", o.UnixSocketMode, "file mode of a unix:// --grpc-address socket")
	fs.StringVar(&o.UnixSocketOwner, "unix-socket-owner", o.UnixSocketOwner, "owner of a unix:// --grpc-address socket: uid, uid:gid or :gid (numeric)")
	fs.StringVar(&o.UnixSocketAllowedUIDs, "unix-socket-allowed-uids", o.UnixSocketAllowedUIDs, "comma-separated numeric uids whose processes may connect to a unix:// listener; the kernel's credentials of each connecting process (SO_PEERCRED, Linux) are checked at accept, others are closed, counted and logged; empty: anyone the socket's mode and owner let in")
	fs.BoolVar(&o.AllowPlaintext, "insecure-allow-plaintext", o.AllowPlaintext, "allow plaintext gRPC on a non-loopback TCP address (tokens and objects travel in the clear)")
}

func (o *Options) addAuthFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.AuthMode, "auth-mode", o.AuthMode, "who may read what: none (Unix socket or loopback only), kubernetes (bearer token, TokenReview + SubjectAccessReview) or mtls (client certificates mapped by mtlsClients in the config)")
	fs.StringVar(&o.TokenAudiences, "auth-token-audiences", o.TokenAudiences, "comma-separated audiences a bearer token must be issued for (--auth-mode=kubernetes)")
	fs.StringVar(&o.NodeBoundServiceAccounts, "node-bound-service-accounts", o.NodeBoundServiceAccounts, "comma-separated namespace:name of ServiceAccounts (a node tier's leaves) confined to the node their pod's token names, as the Node authorizer confines a kubelet: of pods and of resources with a {.spec.nodeName} index they may only list and watch their node's objects; a token without a node is refused (--auth-mode=kubernetes; docs/security.md)")
	fs.DurationVar(&o.AuthenticationCacheTTL, "authentication-cache-ttl", o.AuthenticationCacheTTL, "how long a TokenReview result is reused")
	fs.DurationVar(&o.AuthorizationCacheTTL, "authorization-cache-ttl", o.AuthorizationCacheTTL, "how long an allowed SubjectAccessReview is reused; a revoked permission ends open watches within it plus --auth-recheck-interval")
	fs.DurationVar(&o.AuthorizationDeniedCacheTTL, "authorization-denied-cache-ttl", o.AuthorizationDeniedCacheTTL, "how long a denied SubjectAccessReview is reused")
	fs.DurationVar(&o.RecheckInterval, "auth-recheck-interval", o.RecheckInterval, "how often an open Watch re-checks its caller's token and permission (answered from the caches above)")
}

func (o *Options) addLimitFlags(fs *flag.FlagSet) {
	l := &o.Limits
	fs.IntVar(&o.MaxWatches, "max-watches", o.MaxWatches, "most Watch streams open at once, over all clients")
	fs.IntVar(&o.MaxProjections, "max-projections", o.MaxProjections, "most distinct field masks (WatchRequest.fields) in use at once on one resource's Watch streams; each is projected once per event for every stream that uses it")
	fs.IntVar(&l.MaxWatchesPerIdentity, limits.MaxWatchesPerIdentity, l.MaxWatchesPerIdentity, "most Watch streams one client identity may have open (with --auth-mode none, each connection is an identity)")
	fs.Float64Var(&l.WatchRate, limits.WatchRate, l.WatchRate, "new Watch calls per second one client identity may start (token bucket); calls past it wait their turn (--max-queue-wait)")
	fs.IntVar(&l.WatchBurst, limits.WatchBurst, l.WatchBurst, "new Watch calls one client identity may start at once")
	fs.Float64Var(&l.ListRate, limits.ListRate, l.ListRate, "new List calls (first pages) per second one client identity may start (token bucket); calls past it wait their turn (--max-queue-wait)")
	fs.IntVar(&l.ListBurst, limits.ListBurst, l.ListBurst, "new List calls one client identity may start at once")
	fs.DurationVar(&l.MaxQueueWait, limits.MaxQueueWait, l.MaxQueueWait, "longest a Watch or List call past its identity's rate waits for its turn; one whose turn is further off, or after its deadline, is refused at once with RESOURCE_EXHAUSTED and the delay as RetryInfo")
	fs.IntVar(&l.MaxQueuedPerIdentity, limits.MaxQueuedPerIdentity, l.MaxQueuedPerIdentity, "most calls of one client identity waiting for their turn at once")
	fs.IntVar(&l.MaxQueued, limits.MaxQueued, l.MaxQueued, "most calls waiting for their turn at once, over all clients")
	fs.IntVar(&l.MaxIdentities, limits.MaxIdentities, l.MaxIdentities, "most client identities tracked for the per-identity limits")
	fs.UintVar(&o.MaxStreamsPerConnection, "max-streams-per-connection", o.MaxStreamsPerConnection, "most concurrent gRPC streams on one client connection")
	fs.IntVar(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, "largest request message accepted")
	fs.IntVar(&o.MaxPageSize, "max-page-size", o.MaxPageSize, "most objects in one List page (a larger limit is clamped)")
	fs.DurationVar(&o.ContinueLifetime, "continue-lifetime", o.ContinueLifetime, "Kubernetes API: how long a list's continue token is valid; an older one is 410 Expired with an inconsistent continue token, as the API server's after etcd compaction (set it to the API server's --etcd-compaction-interval)")
	fs.StringVar(&o.ConsistentReadFallback, "consistent-read-fallback", o.ConsistentReadFallback, "Kubernetes API: what a consistent read gets when the cache cannot be shown current within --consistent-read-timeout: forward (to the API server with the caller's credentials; 429 without them) or refuse (429 Retry-After: 1)")
	fs.StringVar(&o.KubeAPISelfSignedCA, "kube-api-tls-self-signed", o.KubeAPISelfSignedCA, "serve the Kubernetes API over TLS with a certificate for 127.0.0.1, ::1 and localhost that informerd issues from a CA of its own and renews before it expires, and publish the CA at this path (a volume shared with the app, mounted as its service account's ca.crt); the CA's key is kept in --state-dir/tls when set. gRPC keeps --tls-cert-file, or plaintext on loopback")
	fs.IntVar(&o.KubeAPIHTTP2MaxStreams, "kube-api-http2-max-streams", o.KubeAPIHTTP2MaxStreams, "Kubernetes API over HTTP/2: most concurrent streams on one connection (MAX_CONCURRENT_STREAMS); a client with more requests open opens another connection, as client-go does. 0: --max-watches + 100, so one connection may carry every watch")
	fs.BoolVar(&o.KubeAPICompression, "kube-api-compression", o.KubeAPICompression, "Kubernetes API: gzip a get or list answer over 128 KiB, and a WatchList stream, for a client that sends Accept-Encoding: gzip, as the API server does; turn it off for sidecars on loopback, where it only costs CPU")
	fs.DurationVar(&o.ConsistentReadTimeout, "consistent-read-timeout", o.ConsistentReadTimeout, "Kubernetes API: how long a read waits for the cache to reach the API server's resourceVersion (a consistent read, or a resourceVersion ahead of the cache) before it is refused with 429 (consistent) or forwarded (ahead)")
	fs.DurationVar(&o.KeepaliveTime, "keepalive-time", o.KeepaliveTime, "ping a client connection idle this long, to find clients that vanished without closing")
	fs.DurationVar(&o.KeepaliveTimeout, "keepalive-timeout", o.KeepaliveTimeout, "close a connection whose ping is not answered within this, ending its streams")
}

// Validate runs the checks that need no cluster: a configuration is given
// and valid, the listener is not exposed insecurely (an error wrapping
// transport.ErrInsecure says which flags fix it), and --auth-mode=mtls has
// clients to admit. New runs them too.
func (o Options) Validate() error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	_, err = o.validate(cfg)
	return err
}

// config returns the injected configuration or loads ConfigPath, told
// whether the Kubernetes API is served (it changes a default).
func (o Options) config() (*config.Config, error) {
	c := o.Config
	if c == nil {
		if o.ConfigPath == "" {
			return nil, errors.New("--config is required: a YAML file listing the resources to cache (see deploy/config.example.yaml)")
		}
		var err error
		if c, err = config.Load(o.ConfigPath); err != nil {
			return nil, err
		}
	} else {
		copied := *c
		c = &copied
	}
	c.ServesKubernetesAPI = o.KubeAPIAddress != ""
	return c, nil
}

// validate checks o against cfg. It returns a warning to log loudly when
// plaintext is allowed on a non-loopback address.
func (o Options) validate(cfg *config.Config) (warning string, err error) {
	warning, err = transport.Security{
		Address: o.GRPCAddress, TLS: o.TLS.CertFile != "" || o.Creds != nil, ClientCA: o.TLS.ClientCAFile != "",
		AuthMode: o.AuthMode, AllowPlaintext: o.AllowPlaintext,
	}.Check()
	if err != nil {
		return "", err
	}
	if o.KubeAPIAddress != "" {
		kwarn, err := transport.Security{
			Address: o.KubeAPIAddress, TLS: o.TLS.CertFile != "" || o.KubeAPISelfSignedCA != "", ClientCA: o.TLS.ClientCAFile != "",
			AuthMode: o.AuthMode, AllowPlaintext: o.AllowPlaintext,
		}.Check()
		if err != nil {
			return "", fmt.Errorf("--kube-api-address: %w", err)
		}
		if warning == "" {
			warning = kwarn
		}
	}
	if err := o.Audit.Validate(); err != nil {
		return "", err
	}
	if o.Audit.Enabled() && o.KubeAPIAddress == "" {
		return "", errors.New("--audit-log-path and --audit-policy-file audit the Kubernetes API reads informerd answers from its cache; set --kube-api-address too (gRPC calls are not audited)")
	}
	if o.StateDir != "" && o.StateFlushInterval <= 0 {
		return "", fmt.Errorf("--state-flush-interval must be positive, got %s", o.StateFlushInterval)
	}
	if o.StateDir != "" && o.StateFlushEvents <= 0 {
		return "", fmt.Errorf("--state-flush-events must be positive, got %d", o.StateFlushEvents)
	}
	if c := o.ConsistencyCheck; c.Interval < 0 || c.PageSize <= 0 || c.PagePause < 0 {
		return "", fmt.Errorf("--consistency-check-interval must be 0 (off) or positive, --consistency-check-page-size positive and --consistency-check-page-interval not negative; got %s, %d, %s", c.Interval, c.PageSize, c.PagePause)
	}
	if o.MemoryLimitRatio < 0 || o.MemoryLimitRatio > 1 {
		return "", fmt.Errorf("--memory-limit-ratio must be from 0 (off) to 1, a share of the cgroup's memory limit; got %v", o.MemoryLimitRatio)
	}
	if o.MaxProjections <= 0 {
		return "", fmt.Errorf("--max-projections must be positive, got %d: it bounds the distinct field masks in use on one resource's watches", o.MaxProjections)
	}
	if o.CacheCompression != pipeline.CompressionOff && o.CacheCompression != pipeline.CompressionCold {
		return "", fmt.Errorf("--cache-compression must be %s or %s, got %q", pipeline.CompressionOff, pipeline.CompressionCold, o.CacheCompression)
	}
	if o.CacheCompressionMinObjects <= 0 {
		return "", fmt.Errorf("--cache-compression-min-objects must be positive, got %d", o.CacheCompressionMinObjects)
	}
	if o.KubeAPIHTTP2MaxStreams < 0 {
		return "", fmt.Errorf("--kube-api-http2-max-streams must be 0 (--max-watches + 100) or positive, got %d", o.KubeAPIHTTP2MaxStreams)
	}
	if o.GCPercent <= 0 {
		return "", fmt.Errorf("--gc-percent must be positive, got %d (to turn the collector off, set GOGC=off in the environment)", o.GCPercent)
	}
	if err := o.validateUpstream(cfg); err != nil {
		return "", err
	}
	if err := o.validateNodeBound(cfg); err != nil {
		return "", err
	}
	if o.AuthMode == auth.ModeMTLS && len(cfg.MTLSClients) == 0 {
		return "", fmt.Errorf("--auth-mode=mtls: config %s has no mtlsClients, so every client would be refused; map certificate identities to resources there (docs/configuration.md)", o.ConfigPath)
	}
	return warning, nil
}

// validateUpstream checks that the configuration fits where the objects
// come from: an upstream informerd takes its Selector, not the API
// server's field selectors, and serves no API server requests.
func (o Options) validateUpstream(cfg *config.Config) error {
	if o.Upstream.Address == "" {
		for _, r := range cfg.Resources {
			if r.UpstreamSelector != nil {
				return fmt.Errorf("resource %s has an upstreamSelector, which takes a part from an upstream informerd; set --upstream-informerd, or use namespace and labelSelector to narrow the API server's watch", r.Resource)
			}
		}
		return nil
	}
	for _, r := range cfg.Resources {
		if r.FieldSelector != "" {
			return fmt.Errorf("resource %s: fieldSelector is the API server's; with --upstream-informerd, take a part with upstreamSelector (namespace, labelSelector, index)", r.Resource)
		}
		if u := r.UpstreamSelector; u != nil && u.Namespace != "" && r.Namespace != "" && u.Namespace != r.Namespace {
			return fmt.Errorf("resource %s: namespace %q and upstreamSelector.namespace %q differ; set one", r.Resource, r.Namespace, u.Namespace)
		}
	}
	if o.KubeAPIAddress != "" {
		return errors.New("--kube-api-address forwards what it does not cache to the API server, which an informerd with --upstream-informerd does not talk to; serve the Kubernetes API from the cluster tier")
	}
	return nil
}
