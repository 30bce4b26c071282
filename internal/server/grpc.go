package server

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
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
// authentication and limits, and the codec that sends its pre-encoded
// responses. The caller registers health (through Register) and
// reflection, serves, and stops
// it.
func (s *Server) NewGRPC(o GRPCOptions) *grpc.Server {
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.MaxStreamsPerConnection == 0 {
		o.MaxStreamsPerConnection = DefaultMaxStreamsPerConnection
	}
	if o.KeepaliveTime <= 0 {
		o.KeepaliveTime = DefaultKeepaliveTime
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = DefaultKeepaliveTimeout
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
		// Responses with objects are sent pre-encoded (codec.go).
		grpc.ForceServerCodecV2(newCodec()),
		// Connections are told apart for the limits (conn.go).
		grpc.Creds(numbered(o.Creds)),
	}
	gs := grpc.NewServer(opts...)
	s.Register(gs, s.serviceDesc(), s)
	return gs
}

// serviceDesc is CacheService's as generated, except that Get and List
// answer with encoded messages.
func (s *Server) serviceDesc() *grpc.ServiceDesc {
	d := pb.CacheService_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		m := &d.Methods[i]
		switch m.MethodName {
		case "Get":
			m.Handler = encodedMethod(pb.CacheService_Get_FullMethodName, s.get)
		case "List":
			m.Handler = encodedMethod(pb.CacheService_List_FullMethodName, s.list)
		}
	}
	return &d
}

// Register registers another service on gs, a server NewGRPC returned,
// with its unary requests that grpc refuses for their size counted as
// CacheService's are (streaming ones are counted by the stream
// interceptor). The health service is one.
func (s *Server) Register(gs *grpc.Server, desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		d.Methods[i].Handler = s.countingTooLarge(d.Methods[i].Handler)
	}
	gs.RegisterService(&d, impl)
}

// encodedMethod is a handler as protoc-gen-go-grpc generates them, for a
// method whose response is encoded.
func encodedMethod[Req any](fullMethod string, call func(context.Context, *Req) (*encoded, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		handler := func(ctx context.Context, req any) (any, error) {
			m, err := call(ctx, req.(*Req))
			if err != nil {
				return nil, err // not a nil *encoded in an interface
			}
			return m, nil
		}
		if interceptor == nil {
			return handler(ctx, req)
		}
		return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, handler)
	}
}

// countingTooLarge counts the requests of h that grpc refused for their
// size: it refuses them when h decodes them, before any interceptor runs.
func (s *Server) countingTooLarge(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		return h(srv, ctx, func(req any) error {
			err := dec(req)
			s.countTooLarge(err)
			return err
		}, interceptor)
	}
}

// countTooLarge counts err if it is grpc's refusal of a request larger than
// MaxRequestBytes. No stats handler does it: grpc would then build a
// stats.OutPayload for every message sent.
func (s *Server) countTooLarge(err error) {
	if err == nil {
		return
	}
	if st, _ := status.FromError(err); st.Code() == codes.ResourceExhausted &&
		strings.Contains(st.Message(), "received message") && strings.Contains(st.Message(), "larger than max") {
		s.opts.Observer.LimitHit("max-request-bytes")
	}
}
