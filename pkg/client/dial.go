package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Config says how to reach informerd and who to be. The zero value with an
// Address is a plaintext connection without credentials, which informerd
// accepts on a Unix socket or loopback (--auth-mode=none).
type Config struct {
	// Address is host:port, or unix:///path/to/informerd.sock. Several
	// replicas are host:port,host:port; a host that resolves to several
	// addresses (a headless Service) names them all. Dial connects to one
	// at random and moves to another when it fails.
	Address string

	// CAFile is a PEM bundle to verify informerd's serving certificate
	// with; setting it (or TLS) turns TLS on. ServerName overrides the
	// name checked against the certificate.
	CAFile     string
	ServerName string
	// CertFile and KeyFile are the client certificate and key for
	// --auth-mode=mtls. They are read at every TLS handshake, so a rotated
	// certificate is used by the next connection.
	CertFile, KeyFile string
	// TLS is a complete TLS configuration; it is used as given, instead of
	// the files above.
	TLS *tls.Config

	// TokenFile holds a bearer token for --auth-mode=kubernetes, usually a
	// projected ServiceAccount token for the audience "informerd". It is
	// sent as "authorization: Bearer <token>" with every call and read
	// again whenever the file changes, so the kubelet's rotation is seen.
	TokenFile string

	// Insecure allows plaintext to an address that is neither a Unix
	// socket nor loopback, and a token over it. Only for tests and for
	// informerd started with --insecure-allow-plaintext.
	Insecure bool
}

// Flow-control windows of Dial's connections: how many bytes informerd may
// send on one stream before the client has read them, and on the whole
// connection before the client's transport has received them. Fixed
// windows turn off grpc-go's bandwidth probing, which costs a PING and its
// answer per message of a quiet stream.
const (
	StreamWindow = 4 << 20
	ConnWindow   = 16 << 20
)

// Dial returns a connection to informerd as c describes; opts are added
// after the options Dial sets. Like grpc.NewClient it does not connect
// until the first call. Close the connection when done.
func Dial(c Config, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if c.Address == "" {
		return nil, errors.New("informerd client: no address; give host:port or unix:///path")
	}
	tgt, replicas, err := c.target()
	if err != nil {
		return nil, err
	}
	local := isLocal(c.Address)
	if replicas != nil {
		local = !slices.ContainsFunc(replicas, func(a string) bool { return !isLocal(a) })
	}
	tlsConf, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	var dialOpts []grpc.DialOption
	if tlsConf != nil {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	} else {
		if !local && !c.Insecure {
			return nil, fmt.Errorf("informerd client: %s is not a Unix socket or loopback address, so it needs TLS (a CA file); set Insecure only if informerd runs with --insecure-allow-plaintext", c.Address)
		}
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if c.TokenFile != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(&tokenFile{path: c.TokenFile, secure: tlsConf != nil}))
	}
	// Fixed flow-control windows. With grpc-go's default, a window that
	// grows by probing the bandwidth-delay product, the client sends a
	// PING after nearly every message of a quiet Watch stream, and
	// informerd must read and answer each one: a second write for every
	// event. The fixed connection window is the most the probing would
	// grow to; a message larger than the stream window (a big List page)
	// is granted a window of its own size when read. A caller's options
	// come after and may change the sizes; grpc-go has no option that
	// turns the probing back on.
	dialOpts = append(dialOpts, grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow))
	// A broken connection is back within about a second of its replica's
	// return, without a herd of reconnects (reconnect).
	dialOpts = append(dialOpts, reconnect)
	// Replicas are tried in a random order, so that clients spread over
	// them; the connection moves on when the one in use fails.
	dialOpts = append(dialOpts, grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pick_first":{"shuffleAddressList":true}}]}`))
	if replicas != nil {
		r := manual.NewBuilderWithScheme("informerd-replicas")
		addrs := make([]resolver.Address, len(replicas))
		for i, a := range replicas {
			addrs[i].Addr = a
			if c.ServerName == "" {
				// Each replica's certificate is checked against its own host.
				addrs[i].ServerName, _, _ = net.SplitHostPort(a)
			}
		}
		r.InitialState(resolver.State{Addresses: addrs})
		dialOpts = append(dialOpts, grpc.WithResolvers(r))
		tgt = r.Scheme() + ":///replicas"
	}
	conn, err := grpc.NewClient(tgt, append(dialOpts, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("informerd client: %s: %w", c.Address, err)
	}
	return conn, nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	if c.TLS != nil {
		return c.TLS, nil
	}
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("informerd client: give both a client certificate file and its key file, or neither")
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("informerd client: read CA file: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("informerd client: CA file %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		// Read at each handshake: a rotated certificate needs no restart.
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			return nil, fmt.Errorf("informerd client: client certificate: %w", err)
		}
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("informerd client: client certificate: %w", err)
			}
			return &cert, nil
		}
	}
	return conf, nil
}

// target turns the address into a gRPC target: unix:///path stays as it is
// (grpc resolves it), host:port goes through DNS. A list of replicas is
// returned as replicas instead, each a host:port.
func (c Config) target() (target string, replicas []string, err error) {
	if !strings.Contains(c.Address, ",") {
		if strings.HasPrefix(c.Address, "unix:") {
			return c.Address, nil, nil
		}
		return "dns:///" + c.Address, nil, nil
	}
	for a := range strings.SplitSeq(c.Address, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil || strings.HasPrefix(a, "unix:") {
			return "", nil, fmt.Errorf("informerd client: address %q: each of several replicas must be host:port", a)
		}
		replicas = append(replicas, a)
	}
	return "", replicas, nil
}

// isLocal says whether addr is a Unix socket or a loopback host:port, where
// plaintext is acceptable.
func isLocal(addr string) bool {
	if strings.HasPrefix(addr, "unix:") {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
