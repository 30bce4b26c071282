package wirecount

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/stats"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

func TestCounter(t *testing.T) {
	var c Counter
	ctx := context.Background()
	for _, s := range []stats.RPCStats{
		&stats.InPayload{Client: true, Payload: &pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_MODIFIED}, WireLength: 105},
		&stats.InPayload{Client: true, Payload: &pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_BOOKMARK}, WireLength: 12},
		&stats.InPayload{Client: true, Payload: &pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_ADDED}, WireLength: 95},
		&stats.InPayload{Client: true, Payload: &pb.ListResponse{}, WireLength: 5000}, // not a Watch response
		&stats.OutPayload{Client: true, Payload: &pb.WatchRequest{}, WireLength: 30},  // sent, not received
	} {
		c.HandleRPC(ctx, s)
	}
	want := Counts{Events: 2, Bookmarks: 1, EventBytes: 200, BookmarkBytes: 12}
	if diff := cmp.Diff(want, c.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Events: 1, EventBytes: 95}, want.Sub(Counts{Events: 1, Bookmarks: 1, EventBytes: 105, BookmarkBytes: 12})); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
}
