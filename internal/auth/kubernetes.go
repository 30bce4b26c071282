package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	tokenwebhook "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authzwebhook "k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	authzmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubernetesOptions configure delegated authentication and authorization.
type KubernetesOptions struct {
	// Audiences a token must be issued for; default ["informerd"].
	Audiences []string
	// AuthenticationTTL is how long a TokenReview result is reused;
	// AuthorizedTTL and UnauthorizedTTL the same for SubjectAccessReviews.
	// A revoked permission is seen within AuthorizedTTL.
	AuthenticationTTL, AuthorizedTTL, UnauthorizedTTL time.Duration
	// Registerer receives the review request metrics; may be nil.
	Registerer prometheus.Registerer
	// NodeBinding confines the ServiceAccounts it names to their node
	// (--node-bound-service-accounts), before the SubjectAccessReview,
	// which still decides; nil binds no one.
	NodeBinding *NodeBinding
}

// Kubernetes authenticates bearer tokens with TokenReview and authorizes
// with SubjectAccessReview, as the caller, against the API server informerd
// reads from. Results are cached (tokens by hash; at most 8192 access
// decisions, least recently used first out).
type Kubernetes struct {
	tokens    authenticator.Token
	access    authorizer.Authorizer
	audiences authenticator.Audiences
	nodes     *NodeBinding
}

var (
	_ Authenticator = (*Kubernetes)(nil)
	_ Authorizer    = (*Kubernetes)(nil)
)

// Defaults of KubernetesOptions, used by informerd's flags too.
const (
	DefaultAudience = "informerd"
	DefaultCacheTTL = 10 * time.Second
)

// retry is how delegated reviews are retried on transient errors: quickly,
// so a caller is not held long when the API server is away.
var retry = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 3}

// NewKubernetes builds the delegated authenticator and authorizer over cfg.
// It needs RBAC to create tokenreviews and subjectaccessreviews (the
// system:auth-delegator ClusterRole).
func NewKubernetes(cfg *rest.Config, o KubernetesOptions) (*Kubernetes, error) {
	if len(o.Audiences) == 0 {
		o.Audiences = []string{DefaultAudience}
	}
	for _, ttl := range []*time.Duration{&o.AuthenticationTTL, &o.AuthorizedTTL, &o.UnauthorizedTTL} {
		if *ttl <= 0 {
			*ttl = DefaultCacheTTL
		}
	}
	rc := rest.CopyConfig(cfg)
	// Every cold review holds a caller: k8s.io/apiserver's delegated
	// authentication and authorization lift client-go's default 5 QPS to
	// these for the same reason.
	rc.QPS, rc.Burst = 200, 400
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("auth: client for reviews: %w", err)
	}
	m := newReviewMetrics(o.Registerer)
	tokens, err := tokenwebhook.NewFromInterface(client.AuthenticationV1(), o.Audiences, retry, 10*time.Second, tokenwebhook.AuthenticatorMetrics{
		RecordRequestTotal:   func(_ context.Context, code string) { m.requests.WithLabelValues("token", code).Inc() },
		RecordRequestLatency: func(_ context.Context, code string, s float64) { m.latency.WithLabelValues("token").Observe(s) },
	})
	if err != nil {
		return nil, fmt.Errorf("auth: token review: %w", err)
	}
	access, err := authzwebhook.NewFromInterface(client.AuthorizationV1(), o.AuthorizedTTL, o.UnauthorizedTTL, retry,
		authorizer.DecisionDeny, accessMetrics{m: m}, nil)
	if err != nil {
		return nil, fmt.Errorf("auth: subject access review: %w", err)
	}
	return &Kubernetes{
		// Rejections are cached for the TTL, so a client repeating a bad
		// token costs one review per TTL; failures of the review itself are
		// not, so they end with the outage.
		tokens:    tokencache.New(rejections{tokens}, false, o.AuthenticationTTL, o.AuthenticationTTL),
		access:    access,
		audiences: o.Audiences,
		nodes:     o.NodeBinding,
	}, nil
}

// Authenticate implements Authenticator: the "authorization: Bearer <token>"
// metadata of the call, reviewed by the API server.
func (k *Kubernetes) Authenticate(ctx context.Context) (user.Info, error) {
	token, err := BearerToken(ctx)
	if err != nil {
		return nil, err
	}
	resp, ok, err := k.tokens.AuthenticateToken(authenticator.WithAudiences(ctx, k.audiences), token)
	switch {
	case err != nil:
		// The cause is in informerd's log (client-go's webhook logs it);
		// the caller learns only that it may retry.
		return nil, &Error{Kind: Unavailable, Msg: "informerd cannot review tokens with the API server right now; retry"}
	case !ok:
		return nil, unauthenticated("token rejected by the API server's TokenReview: it is invalid, expired, or not issued for audience %s; "+
			"send a current ServiceAccount token issued for that audience (a projected volume, or `kubectl create token --audience=%s`)",
			strings.Join(k.audiences, ","), k.audiences[0])
	}
	return resp.User, nil
}

// Authorize implements Authorizer with a SubjectAccessReview as u, after
// the node binding: a bound caller is refused what reaches past its node
// before any review, and reviewed for its node's part.
func (k *Kubernetes) Authorize(ctx context.Context, u user.Info, a Attributes) error {
	a, err := k.nodes.Restrict(u, a)
	if err != nil {
		return err
	}
	decision, reason, err := k.access.Authorize(ctx, authorizer.AttributesRecord{
		User:                      u,
		Verb:                      a.Verb,
		APIGroup:                  a.Group,
		APIVersion:                a.Version,
		Resource:                  a.Resource,
		Namespace:                 a.Namespace,
		Name:                      a.Name,
		ResourceRequest:           true,
		FieldSelectorRequirements: a.FieldSelector,
		LabelSelectorRequirements: a.LabelSelector,
	})
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		return &Error{Kind: Unavailable, Msg: "informerd cannot authorize with the API server (SubjectAccessReview) right now; retry"}
	}
	return forbidden(u, a, reason)
}

// Reviewer returns the SubjectAccessReview authorizer Authorize uses,
// with its decision cache (keyed by the whole review: user, groups, uid,
// extra and every request attribute, selectors included; at most 8,192
// decisions), for the checks that need k8s.io/apiserver's own interface:
// impersonation on the Kubernetes API.
func (k *Kubernetes) Reviewer() authorizer.Authorizer { return k.access }

// rejections tells a token the API server rejected (answered, with a
// reason or none) from a review that could not be made: the first becomes
// "not authenticated" with no error, which the token cache keeps for its
// failure TTL; the second stays an error, which it does not keep.
type rejections struct{ inner authenticator.Token }

func (r rejections) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok, err := r.inner.AuthenticateToken(ctx, token)
	if err == nil || reviewFailed(ctx, err) {
		return resp, ok, err
	}
	return nil, false, nil
}

// reviewFailed reports whether err is the TokenReview request failing (an
// API status such as 429 or 503, a transport error, the call's end) rather
// than the review's answer, which the webhook returns as a plain error.
func reviewFailed(ctx context.Context, err error) bool {
	var status apierrors.APIStatus
	var urlErr *url.Error
	var netErr net.Error
	return ctx.Err() != nil || errors.As(err, &status) || errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// BearerToken reads the "authorization: Bearer <token>" metadata of a call.
func BearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 0 {
		return "", unauthenticated("no credentials: send metadata \"authorization: Bearer <ServiceAccount token>\"")
	}
	if len(values) > 1 {
		return "", unauthenticated("more than one \"authorization\" metadata value; send exactly one")
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", unauthenticated("malformed \"authorization\" metadata: want \"Bearer <token>\"")
	}
	return strings.TrimSpace(token), nil
}

// reviewMetrics count the TokenReviews and SubjectAccessReviews informerd
// makes (cache misses only).
type reviewMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newReviewMetrics(reg prometheus.Registerer) *reviewMetrics {
	m := &reviewMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_auth_review_requests_total",
			Help: "TokenReview (review=token) and SubjectAccessReview (review=access) requests sent to the API server, by HTTP code (\"<error>\" when none came back); cache hits are not counted.",
		}, []string{"review", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_auth_review_duration_seconds",
			Help:    "Time a TokenReview or SubjectAccessReview took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"review"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency)
	}
	return m
}

// accessMetrics adapts reviewMetrics to the webhook authorizer's hooks.
type accessMetrics struct {
	authzmetrics.NoopAuthorizerMetrics
	m *reviewMetrics
}

func (a accessMetrics) RecordRequestTotal(_ context.Context, code string) {
	a.m.requests.WithLabelValues("access", code).Inc()
}

func (a accessMetrics) RecordRequestLatency(_ context.Context, _ string, s float64) {
	a.m.latency.WithLabelValues("access").Observe(s)
}
