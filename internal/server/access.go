package server

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"k8s.io/apiserver/pkg/authentication/user"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
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
// the caller in its context; a List's first page waits for its caller's
// turn under Limits. Install it with grpc.ChainUnaryInterceptor.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if open(info.FullMethod) {
			return handler(ctx, req)
		}
		u, err := s.opts.Authenticator.Authenticate(ctx)
		if err != nil {
			return nil, toStatus(err)
		}
		// Only a List's first page starts a read; the pages after it come
		// from the same snapshot.
		if l, ok := req.(*pb.ListRequest); ok && s.opts.Limits != nil && l.GetContinueToken() == "" {
			err := s.untilStop(ctx, func(ctx context.Context) error {
				return s.opts.Limits.StartList(ctx, limitClient(ctx, u))
			})
			if err != nil {
				return nil, s.refused(err)
			}
		}
		return handler(auth.WithIdentity(ctx, u), req)
	}
}

// StreamInterceptor authenticates every streaming call but the open ones,
// and admits a Watch only within its caller's limits, after its turn under
// Limits. It counts the requests of every streaming call that grpc refused
// for their size.
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
			var release func()
			err := s.untilStop(ctx, func(ctx context.Context) (err error) {
				release, err = s.opts.Limits.StartWatch(ctx, limitClient(ctx, u))
				return err
			})
			if err != nil {
				return s.refused(err)
			}
			defer release()
		}
		return handler(srv, &identityStream{ServerStream: ss, ctx: auth.WithIdentity(ctx, u)})
	}
}

// untilStop calls admit with ctx, ended also (with errShutdown) when the
// server stops: a call waiting for its turn does not hold up shutdown.
func (s *Server) untilStop(ctx context.Context, admit func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.stopping, func() { cancel(context.Cause(s.stopping)) })()
	return admit(ctx)
}

// limitClient names the client whose limits a call of u counts against:
// the authenticated user or certificate identity; for an anonymous caller
// (--auth-mode none, where every caller is the same user), its connection,
// so that one client's burst is not every client's.
func limitClient(ctx context.Context, u user.Info) string {
	if u.GetName() == user.Anonymous {
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			return "connection " + p.Addr.String()
		}
	}
	return fmt.Sprintf("user %q", u.GetName())
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
func attributes(verb string, p pipeline.Served, namespace, name string) auth.Attributes {
	r := p.Resolved()
	return auth.Attributes{
		Verb:       verb,
		Group:      r.GVR.Group,
		Resource:   r.GVR.Resource,
		Configured: p.Configured(),
		Namespace:  namespace,
		Name:       name,
	}
}

// selectionAttributes describe a list or watch of p's resource by sel:
// its namespace and, for the node binding, its index selection.
func selectionAttributes(verb string, p pipeline.Served, sel *pb.Selector) auth.Attributes {
	a := attributes(verb, p, sel.GetNamespace(), "")
	if ix := sel.GetIndex(); ix != nil {
		a.Index, a.IndexValues = ix.GetName(), ix.GetValues()
	}
	return a
}

// refused maps a limit's refusal to its status and counts it.
func (s *Server) refused(err error) error {
	st := toStatus(err)
	if l := limitOf(err); l != "" {
		s.opts.Observer.LimitHit(l)
	}
	return st
}
