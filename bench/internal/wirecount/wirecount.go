// Package wirecount counts the Watch responses a gRPC client receives and
// their bytes on the wire, for the benchmark's projected watchers.
package wirecount

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// Counts is what a client's Watch streams have received.
type Counts struct {
	Events        int64 `json:"events"`        // ADDED, MODIFIED, DELETED
	Bookmarks     int64 `json:"bookmarks"`     // BOOKMARK
	EventBytes    int64 `json:"eventBytes"`    // the events' bytes on the wire
	BookmarkBytes int64 `json:"bookmarkBytes"` // the bookmarks'
}

// Sub returns c minus earlier counts.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{c.Events - earlier.Events, c.Bookmarks - earlier.Bookmarks, c.EventBytes - earlier.EventBytes, c.BookmarkBytes - earlier.BookmarkBytes}
}

// Add returns c plus other.
func (c Counts) Add(other Counts) Counts {
	return Counts{c.Events + other.Events, c.Bookmarks + other.Bookmarks, c.EventBytes + other.EventBytes, c.BookmarkBytes + other.BookmarkBytes}
}

// Counter is a gRPC stats handler (grpc.WithStatsHandler) that counts the
// Watch responses of every stream of its connections, and their bytes on
// the wire: each message's encoded size plus gRPC's 5-byte message header,
// as grpc reports it (InPayload.WireLength); HTTP/2 frame headers are not
// counted. grpc calls it from each stream's goroutine before Recv returns
// the message; Counts may be called at any time.
type Counter struct {
	events, bookmarks, eventBytes, bookmarkBytes atomic.Int64
}

var _ stats.Handler = (*Counter)(nil)

// TagRPC returns ctx.
func (c *Counter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// TagConn returns ctx.
func (c *Counter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn does nothing.
func (c *Counter) HandleConn(context.Context, stats.ConnStats) {}

// HandleRPC counts a received Watch response.
func (c *Counter) HandleRPC(_ context.Context, s stats.RPCStats) {
	in, ok := s.(*stats.InPayload)
	if !ok {
		return
	}
	resp, ok := in.Payload.(*pb.WatchResponse)
	if !ok {
		return // a List, for one
	}
	if resp.GetType() == pb.EventType_EVENT_TYPE_BOOKMARK {
		c.bookmarks.Add(1)
		c.bookmarkBytes.Add(int64(in.WireLength))
		return
	}
	c.events.Add(1)
	c.eventBytes.Add(int64(in.WireLength))
}

// Counts returns what has been counted so far.
func (c *Counter) Counts() Counts {
	return Counts{Events: c.events.Load(), Bookmarks: c.bookmarks.Load(), EventBytes: c.eventBytes.Load(), BookmarkBytes: c.bookmarkBytes.Load()}
}

// Report is bench/thin's answer to "counts": what its watch has received
// since it began, and whether the stream ended.
type Report struct {
	Counts
	Ended bool `json:"ended"`
}
