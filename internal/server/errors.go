package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// errorDomain is the ErrorInfo domain, declared with the reasons in
// api/proto/informerd/v1/errors.proto.
var errorDomain = proto.GetExtension(pb.ErrorReason(0).Descriptor().Options(), pb.E_ErrorDomain).(string)

// withInfo is a status with an ErrorInfo detail, for clients to branch on
// the reason instead of the message.
func withInfo(c codes.Code, reason pb.ErrorReason, msg string, meta map[string]string, more ...protoadapt.MessageV1) error {
	st := status.New(c, msg)
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain, Metadata: meta}}, more...)
	if d, err := st.WithDetails(details...); err == nil {
		st = d
	}
	return st.Err()
}

// exhausted is a limit's refusal: RESOURCE_EXHAUSTED naming the limit, and
// when the client's turn would come, if the limit knows it.
func exhausted(e *limits.Exceeded) error {
	var retry []protoadapt.MessageV1
	if e.RetryAfter > 0 {
		retry = append(retry, &errdetails.RetryInfo{RetryDelay: durationpb.New(e.RetryAfter)})
	}
	return withInfo(codes.ResourceExhausted, pb.ErrorReason_LIMIT_EXCEEDED, e.Msg, map[string]string{"limit": e.Limit}, retry...)
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func unknownResource(name, served string) error {
	return withInfo(codes.NotFound, pb.ErrorReason_RESOURCE_NOT_SERVED,
		fmt.Sprintf("resource %q is not served by this informerd; served: %s", name, served), nil)
}

func objectNotFound(resource, key, rv string) error {
	return withInfo(codes.NotFound, pb.ErrorReason_OBJECT_NOT_FOUND,
		fmt.Sprintf("%s %q not found in the cache (at resourceVersion %s)", resource, key, rv), nil)
}

func notSynced(resource string, st pipeline.Status) error {
	msg := fmt.Sprintf("the cache of %s has not synced yet (phase %s)", resource, st.Phase)
	if st.LastError != "" {
		msg += ": " + st.LastError
	}
	return withInfo(codes.Unavailable, pb.ErrorReason_CACHE_NOT_SYNCED, msg+"; retry shortly", nil)
}

// toStatus maps an error from the cache to a status.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var authErr *auth.Error
	if errors.As(err, &authErr) {
		switch authErr.Kind {
		case auth.Unauthenticated:
			return status.Error(codes.Unauthenticated, authErr.Msg)
		case auth.Forbidden:
			return status.Error(codes.PermissionDenied, authErr.Msg)
		default:
			return withInfo(codes.Unavailable, pb.ErrorReason_AUTH_UNAVAILABLE, authErr.Msg, nil)
		}
	}
	var exceeded *limits.Exceeded
	if errors.As(err, &exceeded) {
		return exhausted(exceeded)
	}
	switch {
	case errors.Is(err, errShutdown):
		return withInfo(codes.Unavailable, pb.ErrorReason_SHUTTING_DOWN, "informerd is shutting down; call again (another replica, or this one once it is back)", nil)
	case errors.Is(err, indexer.ErrTooOld):
		return withInfo(codes.OutOfRange, pb.ErrorReason_RESOURCE_VERSION_TOO_OLD, err.Error()+"; list again and watch from the list's resourceVersion", nil)
	case errors.Is(err, indexer.ErrBadResourceVersion), errors.Is(err, indexer.ErrUnknownIndex):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, indexer.ErrAhead):
		return withInfo(codes.Unavailable, pb.ErrorReason_RESOURCE_VERSION_AHEAD, err.Error()+"; this replica has not caught up yet, retry", nil)
	case errors.Is(err, object.ErrDamaged):
		return status.Error(codes.Unavailable, err.Error()+"; the cache is listing again to repair it, retry shortly")
	case errors.Is(err, indexer.ErrNotSynced):
		return withInfo(codes.Unavailable, pb.ErrorReason_CACHE_NOT_SYNCED, err.Error()+"; retry shortly", nil)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// limitOf names the limit that refused a call, or "".
func limitOf(err error) string {
	var exceeded *limits.Exceeded
	if errors.As(err, &exceeded) {
		return exceeded.Limit
	}
	return ""
}
