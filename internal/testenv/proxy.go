package testenv

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is a TCP proxy on loopback between a client and the API server that
// a test can cut: every open connection is closed and new ones are refused
// until Restore. Its methods may be called concurrently.
type Proxy struct {
	target string
	lis    net.Listener

	mu      sync.Mutex
	cut     bool
	latency time.Duration // added to every chunk forwarded, each way
	frozen  bool          // forward nothing, close nothing
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to the host:port of
// cfg.Host. Close stops it.
func NewProxy(cfg *rest.Config) (*Proxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy target %q: %w", cfg.Host, err)
	}
	return NewProxyTo(u.Host)
}

// NewProxyTo listens on a free loopback port and forwards to target, a
// host:port (such as informerd's gRPC address). Close stops it.
func NewProxyTo(target string) (*Proxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy listen: %w", err)
	}
	p := &Proxy{target: target, lis: lis, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Config returns a copy of cfg that reaches the API server through the proxy.
// The serving certificate covers 127.0.0.1, so TLS still verifies.
func (p *Proxy) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + p.lis.Addr().String()
	return c
}

func (p *Proxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.forget(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer p.forget(up)
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// copy forwards src to dst, holding each chunk for the current latency.
func (p *Proxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.latency
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			for p.isFrozen() {
				time.Sleep(50 * time.Millisecond)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops forwarding without closing anything, as a peer that
// vanished without closing its connections looks; Restore or Close ends it.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// isFrozen reports whether chunks are held; a closed proxy holds none.
func (p *Proxy) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen && !p.cut
}

// SetLatency delays every chunk forwarded from now on by d, each way (0
// for none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

func (p *Proxy) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.frozen = false
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.lis.Close()
	p.Cut()
	p.wg.Wait()
}
