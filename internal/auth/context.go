package auth

import (
	"context"

	"k8s.io/apiserver/pkg/authentication/user"
)

type identityKey struct{}

// WithIdentity returns ctx carrying the authenticated caller.
func WithIdentity(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, identityKey{}, u)
}

// IdentityFrom returns the caller an interceptor put in ctx.
func IdentityFrom(ctx context.Context) (user.Info, bool) {
	u, ok := ctx.Value(identityKey{}).(user.Info)
	return u, ok
}
