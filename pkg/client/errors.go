package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// errorDomain is the ErrorInfo domain informerd's reasons come with,
// declared with them in api/proto/informerd/v1/errors.proto.
var errorDomain = proto.GetExtension(pb.ErrorReason(0).Descriptor().Options(), pb.E_ErrorDomain).(string)

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
	// Reason is the ErrorInfo reason (docs/api.md says when each comes),
	// or ERROR_REASON_UNSPECIFIED when the status carries none or one this
	// client does not know.
	Reason pb.ErrorReason
	// Metadata is the ErrorInfo metadata, e.g. last_resource_version.
	Metadata map[string]string

	reason string // as sent, for Error: it may be newer than this client
	st     *status.Status
	api    metav1.Status
}

// Error implements error.
func (e *Error) Error() string {
	if e.reason != "" {
		return fmt.Sprintf("informerd: %s (%s): %s", e.Code, e.reason, e.Message)
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
			e.reason, e.Metadata = info.GetReason(), info.GetMetadata()
			e.Reason = pb.ErrorReason(pb.ErrorReason_value[e.reason])
		}
	}
	e.api = apiStatus(e)
	return e
}

// ReasonOf returns the ErrorInfo reason of an informerd error, or
// ERROR_REASON_UNSPECIFIED.
func ReasonOf(err error) pb.ErrorReason {
	var e *Error
	if errors.As(FromError(err), &e) {
		return e.Reason
	}
	return pb.ErrorReason_ERROR_REASON_UNSPECIFIED
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
