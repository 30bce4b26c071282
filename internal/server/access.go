package server

import (
	"context"
	"strings"

	"google.golang.org/grpc"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/pipeline"
)

// openMethods are served without authentication: health checks (probes and
// load balancers) and reflection (the schema, which is public).
var openMethods = []string{"/grpc.health.v1.Health/", "/grpc.reflection."}

func open(fullMethod string) bool {
	for _, prefix := range openMethods {
		if strings.HasPrefix(fullMethod, prefix) {
			return true
		}
	}
	return false
}

// UnaryInterceptor authenticates every unary call but the open ones and puts
// the caller in its context. Install it with grpc.ChainUnaryInterceptor.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if open(info.FullMethod) {
			return handler(ctx, req)
		}
		u, err := s.opts.Authenticator.Authenticate(ctx)
		if err != nil {
			return nil, toStatus(err)
		}
		return handler(auth.WithIdentity(ctx, u), req)
	}
}

// StreamInterceptor authenticates every streaming call but the open ones,
// and admits a Watch only within its caller's limits. It counts the
// requests of every streaming call that grpc refused for their size.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() { s.countTooLarge(err) }()
		if open(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		u, err := s.opts.Authenticator.Authenticate(ctx)
		if err != nil {
			return toStatus(err)
		}
		if s.opts.Limits != nil {
			release, err := s.opts.Limits.StartWatch(u.GetName())
			if err != nil {
				return s.refused(err)
			}
			defer release()
		}
		return handler(srv, &identityStream{ServerStream: ss, ctx: auth.WithIdentity(ctx, u)})
	}
}

// identityStream is a ServerStream whose context carries the caller.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// authorize checks that the caller in ctx may do a. A call that did not go
// through the interceptors (in-process tests) is authenticated here.
func (s *Server) authorize(ctx context.Context, a auth.Attributes) error {
	u, ok := auth.IdentityFrom(ctx)
	if !ok {
		var err error
		if u, err = s.opts.Authenticator.Authenticate(ctx); err != nil {
			return toStatus(err)
		}
	}
	return toStatus(s.opts.Authorizer.Authorize(ctx, u, a))
}

// recheck authenticates the caller again and authorizes a: the answers come
// from the caches of Authenticator and Authorizer until their TTLs expire, so
// a revoked token or permission is seen within a TTL.
func (s *Server) recheck(ctx context.Context, a auth.Attributes) error {
	u, err := s.opts.Authenticator.Authenticate(ctx)
	if err != nil {
		return toStatus(err)
	}
	return toStatus(s.opts.Authorizer.Authorize(ctx, u, a))
}

// attributes describe a read of p's resource.
func attributes(verb string, p *pipeline.Pipeline, namespace, name string) auth.Attributes {
	r := p.Resolved()
	return auth.Attributes{
		Verb:       verb,
		Group:      r.GVR.Group,
		Resource:   r.GVR.Resource,
		Configured: p.Name(),
		Namespace:  namespace,
		Name:       name,
	}
}

// refused maps a limit's refusal to its status and counts it.
func (s *Server) refused(err error) error {
	st := toStatus(err)
	if l := limitOf(err); l != "" {
		s.opts.Observer.LimitHit(l)
	}
	return st
}
