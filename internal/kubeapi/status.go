package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/limits"
)

// writeStatus writes a failure as the API server does: a metav1.Status
// with its code, reason and a message, as JSON.
func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	body := statusJSON(st)
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		// As the API server's responsewriters: clients wait this long.
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(body, '\n')) // as the API server's encoder ends it
}

// statusJSON encodes a failure's Status, as a response body or a watch's
// ERROR event.
func statusJSON(st *metav1.Status) []byte {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	body, err := json.Marshal(st)
	if err != nil {
		return []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	return body
}

func statusOf(err *apierrors.StatusError) *metav1.Status {
	st := err.Status()
	return &st
}

func badRequest(msg string) *metav1.Status { return statusOf(apierrors.NewBadRequest(msg)) }

func notFound(gvr schema.GroupVersionResource, name string) *metav1.Status {
	return statusOf(apierrors.NewNotFound(gvr.GroupResource(), name))
}

// expired is the 410 of a resourceVersion or continue token older than the
// history window.
func expired(msg string) *metav1.Status { return statusOf(apierrors.NewResourceExpired(msg)) }

// timeout is the API server's 504 for a resourceVersion the cache has not
// reached in time.
func timeout(msg string) *metav1.Status {
	return statusOf(apierrors.NewTimeoutError(msg, 1))
}

func unavailable(msg string) *metav1.Status {
	return statusOf(apierrors.NewServiceUnavailable(msg))
}

func tooMany(msg string) *metav1.Status {
	return statusOf(apierrors.NewTooManyRequests(msg, 1))
}

// notAcceptable is the API server's 406 for a conversion the read cannot
// have (handlers' errNotAcceptable).
func notAcceptable(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: msg,
	}}
}

// authStatus maps an auth failure to the API server's 401, 403 or 503.
func authStatus(err error) *metav1.Status {
	var e *auth.Error
	if !errors.As(err, &e) {
		return statusOf(apierrors.NewInternalError(err))
	}
	switch e.Kind {
	case auth.Unauthenticated:
		return statusOf(apierrors.NewUnauthorized(e.Msg))
	case auth.Forbidden:
		return &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: e.Msg}
	}
	return unavailable(e.Msg)
}

func statusRequestTooLarge(limit int64) *metav1.Status {
	return statusOf(apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the request body is larger than informerd forwards (%d bytes)", limit)))
}

// limitStatus is the API server's 429 for a call refused by a limit, with
// Retry-After when the limiter says when the caller's turn comes; client-go
// waits that long and retries.
func limitStatus(w http.ResponseWriter, err error) *metav1.Status {
	var e *limits.Exceeded
	if !errors.As(err, &e) {
		return asStatus(err)
	}
	secs := max(int((e.RetryAfter+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	st := tooMany(fmt.Sprintf("%s (limit --%s)", e.Msg, e.Limit))
	st.Details.RetryAfterSeconds = int32(secs)
	return st
}
