package kubeapi

import (
	"net/http"
	"time"

	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
)

// requestTimeout is the API server's --request-timeout default: the longest
// a request that is not a watch may take, and the cap of its timeout
// parameter.
const requestTimeout = 60 * time.Second

// withRequestDeadline validates a request's timeout parameter (an invalid
// duration is the API server's 400, audited) and bounds the request by it,
// at most requestTimeout, with k8s.io/apiserver's own filter, where the API
// server puts it: before authentication. A watch is exempt.
func (h *Handler) withRequestDeadline(next http.Handler) http.Handler {
	return genericfilters.WithRequestDeadline(next, h.opts.AuditSink, h.opts.AuditPolicy, longRunning, codecs, requestTimeout)
}
