package client_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// TestReasonsOnTheWire pins the ErrorInfo reasons as strings: clients in
// other languages compare them, so a renamed enum value breaks them.
func TestReasonsOnTheWire(t *testing.T) {
	want := map[pb.ErrorReason]string{
		pb.ErrorReason_RESOURCE_VERSION_TOO_OLD: "RESOURCE_VERSION_TOO_OLD",
		pb.ErrorReason_CONTINUE_TOKEN_EXPIRED:   "CONTINUE_TOKEN_EXPIRED",
		pb.ErrorReason_CACHE_NOT_SYNCED:         "CACHE_NOT_SYNCED",
		pb.ErrorReason_SLOW_CONSUMER:            "SLOW_CONSUMER",
		pb.ErrorReason_SHUTTING_DOWN:            "SHUTTING_DOWN",
		pb.ErrorReason_LIMIT_EXCEEDED:           "LIMIT_EXCEEDED",
		pb.ErrorReason_RESOURCE_NOT_SERVED:      "RESOURCE_NOT_SERVED",
		pb.ErrorReason_OBJECT_NOT_FOUND:         "OBJECT_NOT_FOUND",
		pb.ErrorReason_RESOURCE_VERSION_AHEAD:   "RESOURCE_VERSION_AHEAD",
		pb.ErrorReason_AUTH_UNAVAILABLE:         "AUTH_UNAVAILABLE",
	}
	got := map[pb.ErrorReason]string{}
	for n := range pb.ErrorReason_name {
		if r := pb.ErrorReason(n); r != pb.ErrorReason_ERROR_REASON_UNSPECIFIED {
			got[r] = r.String()
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}

// TestFromErrorReason reads the ErrorInfo detail: only informerd's domain
// counts, and a reason this client does not know is kept in the message.
func TestFromErrorReason(t *testing.T) {
	withInfo := func(reason, domain string, meta map[string]string) error {
		st, err := status.New(codes.ResourceExhausted, "msg").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	type result struct {
		Reason   pb.ErrorReason
		Metadata map[string]string
		Text     string
	}
	tests := []struct {
		name string
		err  error
		want result
	}{
		{
			name: "known reason",
			err:  withInfo("SLOW_CONSUMER", "informerd.io", map[string]string{"last_resource_version": "42"}),
			want: result{pb.ErrorReason_SLOW_CONSUMER, map[string]string{"last_resource_version": "42"}, "informerd: ResourceExhausted (SLOW_CONSUMER): msg"},
		},
		{
			name: "reason newer than this client",
			err:  withInfo("SOMETHING_NEW", "informerd.io", nil),
			want: result{pb.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "informerd: ResourceExhausted (SOMETHING_NEW): msg"},
		},
		{
			name: "another domain",
			err:  withInfo("SLOW_CONSUMER", "example.com", nil),
			want: result{pb.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "informerd: ResourceExhausted: msg"},
		},
		{
			name: "no ErrorInfo",
			err:  status.Error(codes.ResourceExhausted, "msg"),
			want: result{pb.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "informerd: ResourceExhausted: msg"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := client.FromError(tt.err).(*client.Error)
			if !ok {
				t.Fatalf("FromError(%v) is not an *Error", tt.err)
			}
			got := result{e.Reason, e.Metadata, e.Error()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if r := client.ReasonOf(tt.err); r != tt.want.Reason {
				t.Errorf("ReasonOf = %s, want %s", r, tt.want.Reason)
			}
		})
	}
}
