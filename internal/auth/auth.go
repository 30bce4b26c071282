// Package auth decides who a gRPC caller is and what it may read. Three
// modes: none (the pod or host is the trust boundary), kubernetes (a bearer
// token checked with TokenReview, every call authorized with
// SubjectAccessReview, both cached as the API server's delegated auth does)
// and mtls (the client certificate's identity mapped by the config file).
//
// Authenticators and Authorizers are safe for concurrent use.
package auth

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Modes of --auth-mode.
const (
	ModeNone       = "none"
	ModeKubernetes = "kubernetes"
	ModeMTLS       = "mtls"
)

// Attributes describe one read a caller asks for.
type Attributes struct {
	// Verb is get, list or watch.
	Verb string
	// Group, Version and Resource name the API resource ("", "v1",
	// "configmaps"); Version may be empty (gRPC calls name no version).
	Group, Version, Resource string
	// Configured is the resource's name in informerd's config, which mtls
	// rules use.
	Configured string
	// Namespace is the namespace asked for; empty means all namespaces (or
	// a cluster-scoped resource).
	Namespace string
	// Name is the object's name, for get.
	Name string
	// FieldSelector and LabelSelector are the request's selectors, passed
	// to the authorizer as the API server passes them (KEP-4601), so that
	// an authorizer that reads them (the Node authorizer) decides as it
	// would there. Nil when the request has none.
	FieldSelector fields.Requirements
	LabelSelector labels.Requirements
	// Index and IndexValues are a gRPC List's or Watch's index selection
	// (Selector.index), which the API server has no word for; empty when
	// the request selects by no index. NodeBinding reads them.
	Index       string
	IndexValues []string
}

// String says what was asked in the API server's words.
func (a Attributes) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s resource %q", a.Verb, a.Resource)
	if a.Name != "" {
		fmt.Fprintf(&b, " (name %q)", a.Name)
	}
	fmt.Fprintf(&b, " in API group %q", a.Group)
	if a.Namespace != "" {
		fmt.Fprintf(&b, " in namespace %q", a.Namespace)
	} else {
		b.WriteString(" at the cluster scope (all namespaces)")
	}
	return b.String()
}

// Authenticator finds the caller of a gRPC call from its context (metadata
// or peer certificate). It returns an *Error of kind Unauthenticated when the
// caller cannot be identified.
type Authenticator interface {
	Authenticate(ctx context.Context) (user.Info, error)
}

// Authorizer decides whether u may do a. It returns nil when allowed and an
// *Error of kind Forbidden (or Unavailable when it cannot decide) otherwise.
type Authorizer interface {
	Authorize(ctx context.Context, u user.Info, a Attributes) error
}

// Kind classifies an auth failure; the gRPC layer maps it to a code.
type Kind int

// Kinds of Error.
const (
	Unauthenticated Kind = iota
	Forbidden
	Unavailable
)

// Error is an auth failure with a message a person can act on.
type Error struct {
	Kind Kind
	Msg  string
	// Reason is, for Forbidden, the authorizer's own reason alone (Msg
	// says who was refused what, then this), which the Kubernetes API
	// layer words as the API server does.
	Reason string
}

func (e *Error) Error() string { return e.Msg }

func unauthenticated(format string, args ...any) error {
	return &Error{Kind: Unauthenticated, Msg: fmt.Sprintf(format, args...)}
}

func forbidden(u user.Info, a Attributes, why string) error {
	msg := fmt.Sprintf("user %q cannot %s", u.GetName(), a)
	if why != "" {
		msg += ": " + why
	}
	return &Error{Kind: Forbidden, Msg: msg, Reason: why}
}

// Anonymous is the caller in mode none.
var Anonymous user.Info = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// None trusts every caller: for a Unix socket or loopback address, where
// the pod or host is the trust boundary.
type None struct{}

var (
	_ Authenticator = None{}
	_ Authorizer    = None{}
)

// Authenticate implements Authenticator.
func (None) Authenticate(context.Context) (user.Info, error) { return Anonymous, nil }

// Authorize implements Authorizer.
func (None) Authorize(context.Context, user.Info, Attributes) error { return nil }
