package kubeapi

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/informerd/informerd/internal/auth"
)

// withAuthentication finds the caller of a request informerd answers
// itself, as the gRPC layer does (--auth-mode): the bearer token, reviewed
// with TokenReview, or the verified client certificate; in mode none
// everyone is system:anonymous. The user goes into the request's context
// (request.WithUser), where audit, impersonation and authorization read
// it, as in the API server's chain. A caller that cannot be identified gets
// the API server's 401 and no answer at all, discovery included: the API
// server serves discovery only to authenticated users (system:discovery).
// failed writes that 401 (with the failed-authentication audit event).
func (h *Handler) withAuthentication(next, failed http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := h.opts.Authenticator.Authenticate(authContext(r))
		if err != nil {
			var e *auth.Error
			if errors.As(err, &e) && e.Kind == auth.Unauthenticated {
				failed.ServeHTTP(w, r.WithContext(withAuthError(r.Context(), err)))
				return
			}
			// The review could not be made: the caller may retry.
			writeStatus(w, authStatus(err))
			return
		}
		r = r.WithContext(request.WithUser(r.Context(), u))
		next.ServeHTTP(w, r)
	})
}

type authErrorKey struct{}

func withAuthError(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, authErrorKey{}, err)
}

// unauthorized writes the API server's 401 for the failure
// withAuthentication found.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	err, _ := r.Context().Value(authErrorKey{}).(error)
	if err == nil {
		err = errors.New("Unauthorized")
	}
	writeStatus(w, authStatus(err))
}

// authContext carries the request's credentials in the form package auth
// reads them from a gRPC call: authorization metadata and the peer's TLS
// state.
func authContext(r *http.Request) context.Context {
	ctx := r.Context()
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		md := metadata.MD{}
		for _, s := range v {
			md.Append("authorization", s)
		}
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	if r.TLS != nil {
		ctx = peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: *r.TLS}})
	}
	return ctx
}
