package kubeapi

import (
	"net/http"

	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// withAudit writes an audit.k8s.io/v1 Event for each request informerd
// answers itself, selected by --audit-policy-file, with k8s.io/apiserver's
// own filter: the API server's audit log never sees these reads. It sits
// where the API server puts it, after authentication and before
// impersonation, so an event names the caller and, once impersonation is
// allowed, the impersonated user. A watch is long-running: its event is
// written when it starts (ResponseStarted) and when it ends.
func (h *Handler) withAudit(next http.Handler) http.Handler {
	return genericfilters.WithAudit(next, h.opts.AuditSink, h.opts.AuditPolicy, longRunning)
}

// withFailedAuthenticationAudit audits a request refused for want of
// credentials, as the API server does.
func (h *Handler) withFailedAuthenticationAudit(failed http.Handler) http.Handler {
	return genericfilters.WithFailedAuthenticationAudit(failed, h.opts.AuditSink, h.opts.AuditPolicy)
}

// withAuditInit gives a request informerd answers itself an audit ID (the
// caller's Audit-ID header, or a new one) and the Audit-ID response
// header, as the API server does.
func withAuditInit(next http.Handler) http.Handler { return genericfilters.WithAuditInit(next) }

func longRunning(_ *http.Request, info *request.RequestInfo) bool { return info.Verb == "watch" }
