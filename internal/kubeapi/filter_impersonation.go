package kubeapi

import (
	"net/http"

	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
)

// withImpersonation acts on Impersonate-User, -Group, -Uid and -Extra-*
// headers exactly as kube-apiserver v1.37 does by default: k8s.io/apiserver's
// own filter with constrained impersonation (KEP-5284, beta and on), which
// also performs the legacy "impersonate" checks. Each check is a
// SubjectAccessReview as the caller (opts.Impersonation); once all pass,
// the impersonated user replaces the caller in the request's context, so
// the read is authorized, audited and limited as that user. A refused
// impersonation is the API server's 403.
//
// Without an impersonation checker (--auth-mode none or mtls), withRoute
// has already sent such requests to the API server, which alone can tell
// what the impersonated user may read; this filter is then never reached
// with impersonation headers.
func (h *Handler) withImpersonation(next http.Handler) http.Handler {
	if h.opts.Impersonation == nil {
		return next
	}
	return impersonation.WithConstrainedImpersonation(next, h.opts.Impersonation, codecs)
}
