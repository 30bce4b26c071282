// Package daemon builds informerd from its Options and runs it: the caches
// of the configured resources, the gRPC CacheService with health and
// reflection, and the HTTP server of /metrics, /healthz and /readyz. As in
// Kubernetes components and Prometheus, main only parses flags into
// Options and calls New and Run; tests run informerd the same way, with a
// rest.Config and a parsed configuration of their own.
//
//	o := daemon.NewOptions()
//	o.AddFlags(flag.CommandLine)
//	flag.Parse()
//	d, err := daemon.New(o, log) // builds and listens; starts nothing
//	err = d.Run(ctx)             // serves until ctx ends, then stops in order
package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/internal/audit"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/metrics"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/selfcert"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/state"
	"github.com/informerd/informerd/internal/transport"
	"github.com/informerd/informerd/pkg/client"
)

// Daemon is a built informerd, listening. Run is called once, and
// InstallClientGoMetrics, if at all, before it; the accessors may be called
// concurrently, before, during and after Run.
type Daemon struct {
	log             *slog.Logger
	authMode        string
	shutdownTimeout time.Duration
	reg             *prometheus.Registry
	clientGo        *metrics.ClientGo

	caches *pipeline.Set
	state  *state.Dir // nil without --state-dir
	// checkLater is the API server Run checks, when New did not.
	checkLater *rest.Config
	// upstream is the connection to the upstream informerd
	// (--upstream-informerd); nil when the API server is the source.
	upstream  *grpc.ClientConn
	cacheSrv  *server.Server
	grpcSrv   *grpc.Server
	healthSrv *grpchealth.Server
	httpSrv   *http.Server
	// kubeAPI and kubeSrv serve the Kubernetes API on kubeLis; nil when
	// --kube-api-address is not set.
	kubeAPI *kubeapi.Handler
	kubeSrv *http.Server
	// auditor writes the Kubernetes API's audit events (--audit-log-path);
	// nil when off.
	auditor *audit.Auditor
	// certs are the reloading TLS files of the listeners; Run watches them.
	// grpcCert is the gRPC listener's, which the Kubernetes API shares
	// unless it has a self-signed one of its own (kubeCert).
	certs []*transport.TLS
	// selfCert renews the listeners' own loopback certificate
	// (--kube-api-tls-self-signed); nil without it.
	selfCert *selfcert.Issuer
	grpcCert *transport.TLS
	kubeCert *transport.TLS

	grpcLis, metricsLis, kubeLis net.Listener
	grpcTLS                      bool
	metricsScheme                string
	// peers admits to the Unix socket listeners only the processes of
	// --unix-socket-allowed-uids; nil without the flag.
	peers *transport.Peers

	// memory are the memory flags: TuneRuntime applies the runtime's, Run
	// starts the returner with ReturnMemory.
	memory memoryOptions
}

// memoryOptions are the memory flags' values.
type memoryOptions struct {
	limitRatio   float64
	gcPercent    int
	returnMemory bool
}

// New builds informerd: it validates o, checks that the API server answers,
// builds every part and opens both listeners. It starts no goroutine; Run
// serves, and must be called to release the listeners.
func New(o Options, log *slog.Logger) (*Daemon, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	warning, err := o.validate(cfg)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		log.Warn(warning)
	}
	d := &Daemon{log: log, authMode: o.AuthMode, shutdownTimeout: o.ShutdownTimeout, reg: newRegistry(),
		memory: memoryOptions{limitRatio: o.MemoryLimitRatio, gcPercent: o.GCPercent, returnMemory: o.ReturnMemory}}
	if o.Upstream.Address != "" {
		return d.newLeaf(o, cfg)
	}
	restConfig, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	if o.StateDir == "" {
		if err := checkAPIServer(context.Background(), restConfig, log, len(cfg.Resources)); err != nil {
			return nil, err
		}
	} else {
		// A saved state is served without the API server, so a start
		// does not wait for it: Run checks it and logs the outcome.
		d.checkLater = restConfig
	}
	if o.StateDir != "" {
		if d.state, err = openState(o, restConfig, log); err != nil {
			return nil, err
		}
	}
	built := false
	defer func() {
		if !built && d.state != nil {
			d.state.Close()
		}
	}()
	if err := d.build(o, cfg, restConfig); err != nil {
		return nil, err
	}
	built = true
	return d, nil
}

// build loads the listeners' TLS, wires the caches and servers over
// restConfig (nil for a leaf without --auth-mode=kubernetes), opens the
// listeners and builds the HTTP server.
func (d *Daemon) build(o Options, cfg *config.Config, restConfig *rest.Config) error {
	creds, metricsTLS, err := d.loadTLS(o)
	if err != nil {
		return err
	}
	d.kubeCert = d.grpcCert
	if o.KubeAPISelfSignedCA != "" {
		issuer, err := selfSigned(o)
		if err != nil {
			return err
		}
		t, err := transport.NewTLS("kube-api", transport.TLSFiles{CertFile: issuer.CertFile(), KeyFile: issuer.KeyFile(), ClientCAFile: o.TLS.ClientCAFile})
		if err != nil {
			return fmt.Errorf("--kube-api-tls-self-signed: %w", err)
		}
		d.selfCert, d.kubeCert = issuer, t
		d.certs = append(d.certs, t)
	}
	d.grpcTLS = creds != nil
	if err := d.wire(o, cfg, restConfig, creds); err != nil {
		return err
	}
	if d.peers, err = o.peers(d.reg, d.log); err != nil {
		return err
	}
	if err := d.listen(o, metricsTLS); err != nil {
		return err
	}
	d.httpSrv = &http.Server{Handler: d.httpHandler(o.Profiling), ReadHeaderTimeout: 10 * time.Second}
	return nil
}

// newLeaf builds an informerd whose resources come from an upstream
// informerd. It does not wait for the upstream: a leaf started before its
// upstream serves once the upstream appears, and /readyz says what it
// waits for. The API server is reached only for --auth-mode=kubernetes.
func (d *Daemon) newLeaf(o Options, cfg *config.Config) (*Daemon, error) {
	var restConfig *rest.Config
	if o.AuthMode == auth.ModeKubernetes {
		var err error
		if restConfig, err = o.restConfig(); err != nil {
			return nil, fmt.Errorf("--auth-mode=kubernetes reviews tokens with the API server: %w", err)
		}
	}
	conn, err := client.Dial(o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("--upstream-informerd: %w", err)
	}
	d.upstream = conn
	if d.state, err = openLeafState(o, d.log); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := d.build(o, cfg, restConfig); err != nil {
		_ = conn.Close()
		if d.state != nil {
			d.state.Close()
		}
		return nil, err
	}
	return d, nil
}

// selfSigned issues the listeners' loopback certificate
// (--kube-api-tls-self-signed), its CA kept in --state-dir/tls across
// restarts (so the app's copy stays valid), else in a temporary folder.
func selfSigned(o Options) (*selfcert.Issuer, error) {
	dir := ""
	if o.StateDir != "" {
		dir = filepath.Join(o.StateDir, "tls")
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "informerd-tls-"); err != nil {
			return nil, fmt.Errorf("--kube-api-tls-self-signed: %w", err)
		}
	}
	issuer, err := selfcert.New(selfcert.Options{Dir: dir, CAOut: o.KubeAPISelfSignedCA})
	if err != nil {
		return nil, fmt.Errorf("--kube-api-tls-self-signed: %w", err)
	}
	return issuer, nil
}

// openState opens and locks --state-dir for the cluster of c.
func openState(o Options, c *rest.Config, log *slog.Logger) (*state.Dir, error) {
	id, err := state.IdentityOf(c)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	id = withClusterUID(context.Background(), id, c, log)
	return state.Open(state.Options{
		Dir: o.StateDir, FlushInterval: o.StateFlushInterval, FlushEvents: o.StateFlushEvents,
		Identity: id, Log: log.With("component", "state"),
	})
}

// LoadKubeconfig loads the cluster's client configuration as kubectl does:
// from path, else $KUBECONFIG, else the in-cluster config.
func LoadKubeconfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}

// restConfig returns a copy of the injected rest.Config, or loads
// Kubeconfig, set up as informerd talks to the API server.
func (o Options) restConfig() (*rest.Config, error) {
	var c *rest.Config
	if o.RestConfig != nil {
		c = rest.CopyConfig(o.RestConfig)
	} else {
		var err error
		if c, err = LoadKubeconfig(o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("load kubeconfig: %w (set --kubeconfig or $KUBECONFIG, or run in a pod)", err)
		}
	}
	c.UserAgent = "informerd"
	// Go's transport asks for gzip unless told not to. kube-apiserver then
	// compresses large lists and whole watch-list streams, each event on
	// its own flush, and informerd spends more CPU decompressing a watch
	// than framing it. Next to the API server (in the cluster) bandwidth is
	// cheap and CPU is not.
	c.DisableCompression = !o.APIServerCompression
	return c, nil
}

// checkAPIServer fails when the API server does not answer before ctx
// ends, so a wrong kubeconfig stops informerd at start with the address it
// tried.
func checkAPIServer(ctx context.Context, c *rest.Config, log *slog.Logger, resources int) error {
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	var version apiversion.Info
	body, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(body, &version)
	}
	if err != nil {
		return fmt.Errorf("reach API server at %s: %w", c.Host, err)
	}
	log.Info("connected to API server", "host", c.Host, "version", version.GitVersion, "resources", resources)
	return nil
}

// newRegistry returns a registry with the Go runtime's and the process's
// collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(
		// The heap live after the last GC: what the cache really holds.
		collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}),
	), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// loadTLS loads the certificate files of both listeners; Run reloads them.
// It returns the gRPC listener's credentials (the injected ones, if any)
// and the metrics listener's TLS, nil for plaintext.
func (d *Daemon) loadTLS(o Options) (credentials.TransportCredentials, *transport.TLS, error) {
	creds := o.Creds
	if creds == nil && o.TLS.Enabled() {
		t, err := transport.NewTLS("grpc", o.TLS)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert-file/--tls-key-file/--tls-client-ca-file: %w", err)
		}
		d.certs = append(d.certs, t)
		d.grpcCert = t
		creds = credentials.NewTLS(t.Config())
	}
	if !o.MetricsTLS.Enabled() {
		return creds, nil, nil
	}
	t, err := transport.NewTLS("metrics", o.MetricsTLS)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-tls-cert-file/--metrics-tls-key-file: %w", err)
	}
	d.certs = append(d.certs, t)
	return creds, t, nil
}

// listen opens the gRPC and the metrics listeners.
func (d *Daemon) listen(o Options, metricsTLS *transport.TLS) error {
	var err error
	sock := transport.Socket{Mode: os.FileMode(o.UnixSocketMode), Owner: o.UnixSocketOwner}
	if d.grpcLis, err = transport.Listen("--grpc-address", o.GRPCAddress, sock); err != nil {
		return err
	}
	d.grpcLis = d.peersOn("grpc", d.grpcLis)
	if d.metricsLis, err = transport.Listen("--metrics-address", o.MetricsAddress, transport.Socket{}); err != nil {
		d.grpcLis.Close()
		return err
	}
	d.metricsScheme = "http"
	if metricsTLS != nil {
		d.metricsLis, d.metricsScheme = tls.NewListener(d.metricsLis, metricsTLS.Config()), "https"
	}
	if o.KubeAPIAddress == "" {
		return nil
	}
	if d.kubeLis, err = transport.Listen("--kube-api-address", o.KubeAPIAddress, sock); err != nil {
		d.grpcLis.Close()
		d.metricsLis.Close()
		return err
	}
	d.kubeLis = d.peersOn("kube-api", d.kubeLis)
	d.kubeSrv = d.kubeAPI.Server()
	if d.kubeCert != nil {
		d.kubeLis = tls.NewListener(d.kubeLis, d.kubeCert.Config())
	} else {
		// Plaintext (loopback or a Unix socket): HTTP/1.1 and HTTP/2
		// without TLS (h2c, prior knowledge).
		d.kubeSrv.Protocols = new(http.Protocols)
		d.kubeSrv.Protocols.SetHTTP1(true)
		d.kubeSrv.Protocols.SetUnencryptedHTTP2(true)
	}
	return nil
}

// KubeAPIURL is the URL of the Kubernetes API listener (https with TLS),
// or "" when it is off. For a Unix socket it is the socket's path.
func (d *Daemon) KubeAPIURL() string {
	if d.kubeLis == nil {
		return ""
	}
	if d.kubeLis.Addr().Network() == "unix" {
		return d.kubeLis.Addr().String()
	}
	scheme := "http"
	if d.kubeCert != nil {
		scheme = "https"
	}
	return scheme + "://" + d.kubeLis.Addr().String()
}

// InstallClientGoMetrics makes client-go report informerd's requests to the
// API server to this daemon's /metrics. client-go keeps one set of hooks
// per process, read without a lock: main calls it; tests, which run several
// daemons in one process, do not.
func (d *Daemon) InstallClientGoMetrics() { d.clientGo.Install() }

// TuneRuntime sets the Go runtime's GC percent and soft memory limit from
// --gc-percent and --memory-limit-ratio with the container's cgroup memory
// limit, unless the environment sets GOGC or GOMEMLIMIT, and logs what it
// chose and where it came from. Both are the process's: main calls it;
// tests, which run several daemons in one process, do not.
func (d *Daemon) TuneRuntime() { tuneRuntime(d.memory, "/", d.log) }

// GRPCAddr is the address the gRPC server listens on: host:port, or a Unix
// socket's path.
func (d *Daemon) GRPCAddr() string { return d.grpcLis.Addr().String() }

// MetricsURL is http://host:port (https with TLS) of /metrics, /healthz and
// /readyz.
func (d *Daemon) MetricsURL() string {
	return d.metricsScheme + "://" + d.metricsLis.Addr().String()
}

// Caches returns the pipelines of the configured resources.
func (d *Daemon) Caches() *pipeline.Set { return d.caches }

// CacheServer returns the CacheService.
func (d *Daemon) CacheServer() *server.Server { return d.cacheSrv }
