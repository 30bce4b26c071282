package main

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// The kinds of request an upstreamProxy tells apart.
const (
	upList          = iota // GET of a pod collection: a LIST
	upStreamingList        // a pod WATCH with sendInitialEvents=true: a list streamed as events
	upWatch                // a pod WATCH without initial events: from a resourceVersion, or from now
	upOther                // everything else: discovery, /version, other resources
	upKinds
)

// upstreamCounts are the requests an upstreamProxy forwarded and the
// response bytes it returned, by kind.
type upstreamCounts struct {
	requests, bytes [upKinds]int64
}

func (c upstreamCounts) sub(o upstreamCounts) upstreamCounts {
	for k := range upKinds {
		c.requests[k] -= o.requests[k]
		c.bytes[k] -= o.bytes[k]
	}
	return c
}

func (c upstreamCounts) totalRequests() (n int64) {
	for _, r := range c.requests {
		n += r
	}
	return n
}

func (c upstreamCounts) totalBytes() (n int64) {
	for _, b := range c.bytes {
		n += b
	}
	return n
}

// upstreamProxy is an HTTP reverse proxy on loopback between informerd and
// kube-apiserver: informerd's kubeconfig names it (plain HTTP, no
// credentials) and it forwards over TLS with the harness's administrator
// credentials, counting what informerd asks kube-apiserver for and the
// bytes kube-apiserver answers with. It keeps its address for its life, so
// a state written through it belongs to the same API server (the state's
// identity is the server's URL) when informerd starts again.
type upstreamProxy struct {
	lis      net.Listener
	srv      *http.Server
	rp       *httputil.ReverseProxy
	requests [upKinds]atomic.Int64
	bytes    [upKinds]atomic.Int64
}

// startUpstreamProxy forwards to the API server of cfg with its
// credentials. Compression is off, as it is between informerd and a TLS
// API server by default (--api-server-compression): the proxy drops the
// Accept-Encoding that informerd's plain-HTTP transport adds, and adds
// none of its own.
func startUpstreamProxy(cfg *rest.Config) (*upstreamProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.DisableCompression = true
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &upstreamProxy{lis: lis}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// Over plain HTTP, client-go hands informerd Go's default
			// transport, which asks for gzip whatever DisableCompression
			// says; over TLS (a real kubeconfig) informerd asks for none.
			r.Out.Header.Del("Accept-Encoding")
		},
		Transport:     rt,
		FlushInterval: -1, // watches are streams: every event at once
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: p, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		if err := p.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("upstream proxy: %v", err)
		}
	}()
	return p, nil
}

// url is the proxy's, for a kubeconfig.
func (p *upstreamProxy) url() string { return "http://" + p.lis.Addr().String() }

func (p *upstreamProxy) close() { _ = p.srv.Close() }

// counts returns what has been forwarded so far.
func (p *upstreamProxy) counts() upstreamCounts {
	var c upstreamCounts
	for k := range upKinds {
		c.requests[k] = p.requests[k].Load()
		c.bytes[k] = p.bytes[k].Load()
	}
	return c
}

func (p *upstreamProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := upstreamKind(r)
	p.requests[k].Add(1)
	p.rp.ServeHTTP(&countingWriter{ResponseWriter: w, n: &p.bytes[k]}, r)
}

// upstreamKind classifies a request informerd sends to kube-apiserver.
func upstreamKind(r *http.Request) int {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/pods") {
		return upOther
	}
	q := r.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		if q.Get("sendInitialEvents") == "true" {
			return upStreamingList
		}
		return upWatch
	}
	return upList
}

// countingWriter counts the body bytes written to a response. Unwrap lets
// the reverse proxy flush each watch event through it.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
