package ctl

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// explained is an informerd error told for a person. It wraps the
// *client.Error, so client.ReasonOf still reads its reason.
type explained struct {
	msg string
	err *client.Error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// explain turns the error of an informerd call into a message that says
// what happened and what to do: by the ErrorInfo reason where the status
// has one, else by its code, for every status the API returns
// (docs/api.md). It returns other errors unchanged.
func explain(err error, addr string) error {
	err = client.FromError(err)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out talking to informerd at %s: raise --timeout, or check `informerctl status` for upstream trouble", addr)
	}
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	if msg := byReason(e); msg != "" {
		return &explained{msg: msg, err: e}
	}
	return &explained{msg: byCode(e, addr), err: e}
}

// byReason explains the statuses that carry an ErrorInfo reason; "" for
// those that do not.
func byReason(e *client.Error) string {
	msg := e.Message
	switch e.Reason {
	case pb.ErrorReason_RESOURCE_NOT_SERVED:
		return fmt.Sprintf("not found: %s (`informerctl resources` lists them)", msg)
	case pb.ErrorReason_OBJECT_NOT_FOUND:
		return "not found: " + msg
	case pb.ErrorReason_CONTINUE_TOKEN_EXPIRED:
		return fmt.Sprintf("the list's snapshot left informerd's history between two pages: run the list again (a larger --limit needs fewer pages): %s", msg)
	case pb.ErrorReason_RESOURCE_VERSION_TOO_OLD:
		return tooOld(msg).Error()
	case pb.ErrorReason_CACHE_NOT_SYNCED:
		return fmt.Sprintf("not ready: %s (`informerctl status` shows each resource's state)", msg)
	case pb.ErrorReason_SHUTTING_DOWN:
		return "informerd is shutting down: " + msg
	case pb.ErrorReason_RESOURCE_VERSION_AHEAD:
		return fmt.Sprintf("this informerd has not caught up with that resourceVersion yet: %s (another replica may have; or retry)", msg)
	case pb.ErrorReason_AUTH_UNAVAILABLE:
		return fmt.Sprintf("informerd cannot check this call's credentials with the API server right now: %s", msg)
	case pb.ErrorReason_LIMIT_EXCEEDED:
		return fmt.Sprintf("refused by informerd's limit --%s: %s; retry later or close watches you do not need", e.Metadata["limit"], msg)
	case pb.ErrorReason_SLOW_CONSUMER:
		return fmt.Sprintf("the watch fell behind informerd's history and was ended at resourceVersion %s: %s", e.LastResourceVersion(), msg)
	}
	return ""
}

// byCode explains the statuses without a reason.
func byCode(e *client.Error, addr string) string {
	msg := e.Message
	switch e.Code {
	case codes.NotFound:
		return "not found: " + msg
	case codes.InvalidArgument:
		return "invalid request: " + msg
	case codes.OutOfRange:
		return "out of range: " + msg
	case codes.Unavailable:
		return fmt.Sprintf("informerd at %s is unavailable: %s (is it running there? check --address and the TLS flags)", addr, msg)
	case codes.ResourceExhausted:
		return "too large: " + msg
	case codes.Unauthenticated:
		return fmt.Sprintf("not authenticated: %s (pass --token-file with a token for the audience informerd, or --cert-file and --key-file if informerd runs --auth-mode=mtls)", msg)
	case codes.PermissionDenied:
		return "permission denied: " + msg
	case codes.DeadlineExceeded:
		return fmt.Sprintf("timed out: %s (raise --timeout, or check `informerctl status` for upstream trouble)", msg)
	}
	return fmt.Sprintf("informerd failed (%s): %s", e.Code, msg)
}

// tooOld says what to do about a resourceVersion older than informerd's
// history.
func tooOld(msg string) error {
	return fmt.Errorf("resourceVersion too old: %s; list again (`informerctl get TYPE -o json` shows the list's resourceVersion) and watch from that", msg)
}
