package kubeapi

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 settings of the Kubernetes API's server, from the API server's
// (k8s.io/apiserver's SecureServingOptions): frames and a stream's receive
// window of 256 KiB, which hold at least 99% of request bodies (its
// resourceBody99Percentile), and a 90 s idle timeout. Its streams per
// connection (100, or --http2-max-streams-per-connection) are not: a
// client that multiplexes thousands of watches on one connection, as a
// proxy or a process with many informers does, would be spread over more
// connections or queued; a connection here may carry every watch informerd
// serves (Options.MaxWatches) and http2OtherStreams requests beside them.
// The windows bound only what a client sends (forwarded request bodies):
// events flow within the client's windows.
const (
	http2FrameSize    = 256 << 10
	http2StreamWindow = 256 << 10
	// http2ConnWindow is the largest connection window net/http documents
	// (the API server's is its stream window times its streams, which
	// for thousands of streams would be gigabytes of request bodies).
	http2ConnWindow   = 4<<20 - 1
	http2OtherStreams = 100
	idleTimeout       = 90 * time.Second
)

// Server returns an HTTP server of h for a listener of the Kubernetes API:
// HTTP/1.1, and HTTP/2 over TLS (a listener that offers h2 by ALPN, as
// internal/transport's does) with the settings above. A plaintext listener
// that also speaks HTTP/2 without TLS sets Protocols itself.
//
// HTTP/2 is golang.org/x/net/http2's server, as the API server's, for one
// setting net/http's bundled copy does not expose: the write scheduler.
// The default (round robin) visits every open stream of a connection for
// each frame it writes, idle ones included; with thousands of watches on a
// connection that was a third of informerd's CPU and hundreds of
// milliseconds of delay at 10,000 informers (docs/benchmarks/capacity.md).
// The random scheduler holds only the streams that have frames to send.
// x/net marks this API deprecated in favour of net/http's own HTTP/2,
// which on Go 1.26 offers no scheduler choice; on Go 1.27, where x/net
// wraps net/http, measure the capacity scenario again before upgrading.
func (h *Handler) Server() *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		Protocols:         new(http.Protocols),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          h.http2MaxStreams(),
			MaxReadFrameSize:              http2FrameSize,
			MaxReceiveBufferPerStream:     http2StreamWindow,
			MaxReceiveBufferPerConnection: http2ConnWindow,
		},
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	// The other HTTP/2 settings come from srv.HTTP2 and srv.IdleTimeout,
	// which x/net reads as net/http's own server does.
	//lint:ignore SA1019 the write scheduler is only configurable here (see above)
	h2 := &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler}
	//lint:ignore SA1019 as above
	if err := http2.ConfigureServer(srv, h2); err != nil {
		// Only a TLSConfig with bad cipher suites fails; srv has none.
		panic(fmt.Sprintf("kubeapi: configure HTTP/2: %v", err))
	}
	return srv
}

// http2MaxStreams is a connection's MAX_CONCURRENT_STREAMS.
func (h *Handler) http2MaxStreams() int {
	if h.opts.HTTP2MaxStreams > 0 {
		return h.opts.HTTP2MaxStreams
	}
	return h.opts.MaxWatches + http2OtherStreams
}
