package server

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/limits"
)

// TestToStatus: every refusal a client may act on carries its ErrorInfo
// reason in informerd's domain, so that no client reads the message.
func TestToStatus(t *testing.T) {
	type mapped struct {
		Code           codes.Code
		Domain, Reason string
		Metadata       map[string]string
	}
	tests := []struct {
		name string
		err  error
		want mapped
	}{
		{"unknown resource", unknownResource("widgets", "pods"), mapped{codes.NotFound, "informerd.io", "RESOURCE_NOT_SERVED", nil}},
		{"no such object", objectNotFound("pods", "a/b", "7"), mapped{codes.NotFound, "informerd.io", "OBJECT_NOT_FOUND", nil}},
		{"too old", fmt.Errorf("watch: %w", indexer.ErrTooOld), mapped{codes.OutOfRange, "informerd.io", "RESOURCE_VERSION_TOO_OLD", nil}},
		{"ahead", fmt.Errorf("watch: %w", indexer.ErrAhead), mapped{codes.Unavailable, "informerd.io", "RESOURCE_VERSION_AHEAD", nil}},
		{"not synced", indexer.ErrNotSynced, mapped{codes.Unavailable, "informerd.io", "CACHE_NOT_SYNCED", nil}},
		{"shutting down", errShutdown, mapped{codes.Unavailable, "informerd.io", "SHUTTING_DOWN", nil}},
		{"limit", &limits.Exceeded{Limit: "max-watches", Msg: "too many"}, mapped{codes.ResourceExhausted, "informerd.io", "LIMIT_EXCEEDED", map[string]string{"limit": "max-watches"}}},
		{"auth cannot decide", &auth.Error{Kind: auth.Unavailable, Msg: "retry"}, mapped{codes.Unavailable, "informerd.io", "AUTH_UNAVAILABLE", nil}},
		{"unauthenticated", &auth.Error{Kind: auth.Unauthenticated, Msg: "no"}, mapped{Code: codes.Unauthenticated}},
		{"bad resourceVersion", indexer.ErrBadResourceVersion, mapped{Code: codes.InvalidArgument}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := status.Convert(toStatus(tt.err))
			got := mapped{Code: st.Code()}
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					got.Domain, got.Reason, got.Metadata = info.GetDomain(), info.GetReason(), info.GetMetadata()
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
