package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// GRPCOptions are the transport settings of the gRPC server.
type GRPCOptions struct {
	// Creds secure the connections (TLS, mTLS); nil serves plaintext.
	Creds credentials.TransportCredentials
	// MaxRequestBytes bounds one request message (default 1 MiB).
	MaxRequestBytes int
	// MaxStreamsPerConnection bounds concurrent streams on one connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; clients queue past it).
	MaxStreamsPerConnection uint32
	// KeepaliveTime is how long a connection may be idle before the server
	// pings it, KeepaliveTimeout how long it waits for the answer before it
	// closes the connection and ends its streams: what finds clients that
	// vanished without closing. Defaults 2m and 20s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// Unary and Stream interceptors run before authentication (metrics).
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
}

// NewGRPC returns a gRPC server with s's CacheService registered behind
// authentication and limits. The caller registers health and reflection,
// serves, and stops it.
func (s *Server) NewGRPC(o GRPCOptions) *grpc.Server {
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 1 << 20
	}
	if o.MaxStreamsPerConnection == 0 {
		o.MaxStreamsPerConnection = 1000
	}
	if o.KeepaliveTime <= 0 {
		o.KeepaliveTime = 2 * time.Minute
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = 20 * time.Second
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxRequestBytes),
		grpc.MaxConcurrentStreams(o.MaxStreamsPerConnection),
		// Clients may ping at most every 10s (also while idle); the server
		// pings idle connections to find clients that vanished.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: o.KeepaliveTime, Timeout: o.KeepaliveTimeout}),
		grpc.ChainUnaryInterceptor(append(o.Unary, s.UnaryInterceptor())...),
		grpc.ChainStreamInterceptor(append(o.Stream, s.StreamInterceptor())...),
		grpc.StatsHandler(tooLarge{s.opts.Observer}),
	}
	if o.Creds != nil {
		opts = append(opts, grpc.Creds(o.Creds))
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterCacheServiceServer(gs, s)
	return gs
}

// tooLarge counts requests grpc refused for their size: grpc refuses them
// before any interceptor runs, so only the end of the RPC shows it.
type tooLarge struct{ obs Observer }

func (tooLarge) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (tooLarge) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (tooLarge) HandleConn(context.Context, stats.ConnStats)                       {}

func (h tooLarge) HandleRPC(_ context.Context, rs stats.RPCStats) {
	end, ok := rs.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	if st, _ := status.FromError(end.Error); st.Code() == codes.ResourceExhausted &&
		strings.Contains(st.Message(), "received message") && strings.Contains(st.Message(), "larger than max") {
		h.obs.LimitHit("max-request-bytes")
	}
}
