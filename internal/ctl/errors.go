package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/informerd/informerd/pkg/client"
)

// explain turns the error of an informerd call into a message that says
// what happened and what to do, for every status code the API returns
// (docs/api.md).
func explain(err error, addr string) error {
	err = client.FromError(err)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out talking to informerd at %s: raise --timeout, or check `informerctl status` for upstream trouble", addr)
	}
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	msg := e.Message
	switch e.Code {
	case codes.NotFound:
		if strings.Contains(msg, "not served") {
			return fmt.Errorf("not found: %s (`informerctl resources` lists them)", msg)
		}
		return fmt.Errorf("not found: %s", msg)
	case codes.InvalidArgument:
		return fmt.Errorf("invalid request: %s", msg)
	case codes.OutOfRange:
		if e.Reason == client.ReasonContinueExpired {
			return fmt.Errorf("the list's snapshot left informerd's history between two pages: run the list again (a larger --limit needs fewer pages): %s", msg)
		}
		return fmt.Errorf("resourceVersion too old: %s; list again (`informerctl list RESOURCE -o json` shows the list's resourceVersion) and watch from that", msg)
	case codes.Unavailable:
		switch e.Reason {
		case client.ReasonNotSynced:
			return fmt.Errorf("not ready: %s (`informerctl status` shows each resource's state)", msg)
		case client.ReasonShutdown:
			return fmt.Errorf("informerd is shutting down: %s", msg)
		}
		return fmt.Errorf("informerd at %s is unavailable: %s (is it running there? check --address and the TLS flags)", addr, msg)
	case codes.ResourceExhausted:
		switch e.Reason {
		case client.ReasonLimit:
			return fmt.Errorf("refused by informerd's limit --%s: %s; retry later or close watches you do not need", e.Metadata["limit"], msg)
		case client.ReasonSlowConsumer:
			return fmt.Errorf("the watch fell behind informerd's history and was ended at resourceVersion %s: %s", e.LastResourceVersion(), msg)
		}
		return fmt.Errorf("too large: %s", msg)
	case codes.Unauthenticated:
		return fmt.Errorf("not authenticated: %s (pass --token-file with a token for the audience informerd, or --cert-file and --key-file if informerd runs --auth-mode=mtls)", msg)
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied: %s", msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("timed out: %s (raise --timeout, or check `informerctl status` for upstream trouble)", msg)
	}
	return fmt.Errorf("informerd failed (%s): %s", e.Code, msg)
}
