package kubeapi

import (
	"encoding/json"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// timedOut answers a request whose deadline (its timeout parameter, or
// requestTimeout) passed while it waited, as the API server's timeout
// filter (WithTimeoutForNonLongRunningRequests) does: 504 with the Status
// JSON-encoded without its kind, in a body whose type is sniffed (the
// filter sets none). That filter is not imported: its package needs etcd's
// client.
func timedOut(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusGatewayTimeout)
	_ = json.NewEncoder(w).Encode(&apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0).ErrStatus)
}
