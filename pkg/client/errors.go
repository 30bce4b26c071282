package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons informerd puts in the ErrorInfo detail of a status (domain
// informerd.io), for clients to branch on. docs/api.md lists when each comes.
const (
	// ReasonTooOld: OUT_OF_RANGE, a Watch from a resourceVersion older than
	// the history window. List again and watch from the list's version.
	ReasonTooOld = "RESOURCE_VERSION_TOO_OLD"
	// ReasonContinueExpired: OUT_OF_RANGE, a List continue token whose
	// snapshot left the history window. List again from the first page.
	ReasonContinueExpired = "CONTINUE_TOKEN_EXPIRED"
	// ReasonNotSynced: UNAVAILABLE, the resource's cache has not completed
	// its first list. Retry with backoff.
	ReasonNotSynced = "CACHE_NOT_SYNCED"
	// ReasonSlowConsumer: RESOURCE_EXHAUSTED, a Watch fell out of the
	// history window. Watch again from LastResourceVersion.
	ReasonSlowConsumer = "SLOW_CONSUMER"
	// ReasonShutdown: UNAVAILABLE, informerd is stopping. Watch again from
	// LastResourceVersion, on another replica if there is one.
	ReasonShutdown = "SHUTTING_DOWN"
	// ReasonLimit: RESOURCE_EXHAUSTED, a limit refused the call; the
	// metadata "limit" names its flag. Back off and retry.
	ReasonLimit = "LIMIT_EXCEEDED"

	errorDomain = "informerd.io"
)

// Error is a failed informerd call: its gRPC status, the ErrorInfo reason
// and metadata if the status carries them, and the Kubernetes API status the
// same failure would have from the API server, so that apierrors.IsNotFound,
// IsResourceExpired, IsTooManyRequests and client-go's reflector treat it as
// they treat the API server's.
//
// The mapping:
//
//	OUT_OF_RANGE          410 Expired: client-go lists again
//	NOT_FOUND             404 NotFound
//	INVALID_ARGUMENT      400 BadRequest
//	UNAUTHENTICATED       401 Unauthorized
//	PERMISSION_DENIED     403 Forbidden
//	RESOURCE_EXHAUSTED    429 TooManyRequests (Retry-After 1s)
//	UNAVAILABLE           429 TooManyRequests (Retry-After 1s), as the API
//	                      server answers while its watch cache initializes or
//	                      it shuts down: client-go backs off and watches again
//	                      from its resourceVersion instead of listing again
//	DEADLINE_EXCEEDED     504 Timeout
//	anything else         500 InternalError
type Error struct {
	// Code and Message are the gRPC status's.
	Code    codes.Code
	Message string
	// Reason is the ErrorInfo reason (one of the Reason constants), or "".
	Reason string
	// Metadata is the ErrorInfo metadata, e.g. last_resource_version.
	Metadata map[string]string

	st  *status.Status
	api metav1.Status
}

// Error implements error.
func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("informerd: %s (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("informerd: %s: %s", e.Code, e.Message)
}

// GRPCStatus returns the gRPC status, so status.FromError and status.Code
// work on an *Error.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Status returns the Kubernetes API status (apierrors.APIStatus).
func (e *Error) Status() metav1.Status { return e.api }

// LastResourceVersion is the resourceVersion a Watch ended with
// (SLOW_CONSUMER, SHUTTING_DOWN), to watch again from; "" when unknown.
func (e *Error) LastResourceVersion() string { return e.Metadata["last_resource_version"] }

var _ apierrors.APIStatus = (*Error)(nil)

// FromError turns an error of an informerd call into an *Error. It returns
// nil for nil, and err unchanged when it carries no gRPC status, or when it
// is the caller's own context ending (context.Canceled and
// context.DeadlineExceeded).
func FromError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("informerd: %s: %w", st.Message(), context.Canceled)
	}
	e = &Error{Code: st.Code(), Message: st.Message(), st: st}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			e.Reason, e.Metadata = info.GetReason(), info.GetMetadata()
		}
	}
	e.api = apiStatus(e)
	return e
}

// ReasonOf returns the ErrorInfo reason of an informerd error, or "".
func ReasonOf(err error) string {
	var e *Error
	if errors.As(FromError(err), &e) {
		return e.Reason
	}
	return ""
}

func apiStatus(e *Error) metav1.Status {
	msg := "informerd: " + e.Message
	s := metav1.Status{Status: metav1.StatusFailure, Message: msg}
	switch e.Code {
	case codes.OutOfRange:
		s.Code, s.Reason = http.StatusGone, metav1.StatusReasonExpired
	case codes.NotFound:
		s.Code, s.Reason = http.StatusNotFound, metav1.StatusReasonNotFound
	case codes.InvalidArgument:
		s.Code, s.Reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
	case codes.Unauthenticated:
		s.Code, s.Reason = http.StatusUnauthorized, metav1.StatusReasonUnauthorized
	case codes.PermissionDenied:
		s.Code, s.Reason = http.StatusForbidden, metav1.StatusReasonForbidden
	case codes.ResourceExhausted, codes.Unavailable:
		s.Code, s.Reason = http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests
		s.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	case codes.DeadlineExceeded:
		s.Code, s.Reason = http.StatusGatewayTimeout, metav1.StatusReasonTimeout
	default:
		s.Code, s.Reason = http.StatusInternalServerError, metav1.StatusReasonInternalError
	}
	return s
}
