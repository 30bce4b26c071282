package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// trickle sends a Watch event every 2 ms, as a quiet stream does at a
// modest rate of changes, after a first event of big bytes if set.
type trickle struct {
	pb.UnimplementedCacheServiceServer
	events int
	big    int
}

func (tr trickle) Watch(_ *pb.WatchRequest, stream pb.CacheService_WatchServer) error {
	if tr.big > 0 {
		if err := stream.Send(&pb.WatchResponse{ResourceVersion: strings.Repeat("x", tr.big)}); err != nil {
			return err
		}
	}
	for i := range tr.events {
		if err := stream.Send(&pb.WatchResponse{ResourceVersion: string(rune('a' + i%26))}); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// recording is a listener whose connections keep every byte the server
// reads: the frames its clients send.
type recording struct {
	net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func (l *recording) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, l: l}, nil
}

type recordedConn struct {
	net.Conn
	l *recording
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.got.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// pingsSent watches events from a trickle server over a connection dialed
// by dial and returns how many PING frames (not acknowledgements) the
// client sent the server.
func pingsSent(t *testing.T, tr trickle, dial func(addr string) (*grpc.ClientConn, error)) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{Listener: lis}
	gs := grpc.NewServer()
	pb.RegisterCacheServiceServer(gs, tr)
	go func() { _ = gs.Serve(rec) }()
	defer gs.Stop()
	conn, err := dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := pb.NewCacheServiceClient(conn).Watch(ctx, &pb.WatchRequest{Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	want := tr.events
	if tr.big > 0 {
		want++
	}
	got := 0
	for ; ; got++ {
		ev, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		if got == 0 && tr.big > 0 && len(ev.GetResourceVersion()) != tr.big {
			t.Fatalf("the first event holds %d bytes, want %d", len(ev.GetResourceVersion()), tr.big)
		}
	}
	if got != want {
		t.Fatalf("received %d events, want %d", got, want)
	}
	conn.Close()
	gs.Stop()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	data := rec.got.Bytes()
	if !bytes.HasPrefix(data, []byte(http2.ClientPreface)) {
		t.Fatalf("the server read %d bytes that do not start with the HTTP/2 preface", len(data))
	}
	fr := http2.NewFramer(nil, bytes.NewReader(data[len(http2.ClientPreface):]))
	pings := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break // the end of what was read
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
	return pings
}

// TestDialNoPingPerMessage checks that Dial's connections do not probe
// the bandwidth-delay product: grpc-go's default client sends a PING after
// nearly every message of a quiet stream, and the server must read and
// answer each, which doubled a server's writes per event.
func TestDialNoPingPerMessage(t *testing.T) {
	const events = 50
	plain := pingsSent(t, trickle{events: events}, func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	// The control: grpc-go's defaults do ping, so the count below means
	// something.
	if plain < events/5 {
		t.Fatalf("grpc-go's default client sent %d PINGs for %d spaced messages; this test expects it to probe", plain, events)
	}
	ours := pingsSent(t, trickle{events: events}, func(addr string) (*grpc.ClientConn, error) {
		return client.Dial(client.Config{Address: addr})
	})
	if ours != 0 {
		t.Errorf("client.Dial's connection sent %d PINGs for %d messages (grpc-go's default sent %d), want none", ours, events, plain)
	}
	t.Logf("PINGs for %d messages 2 ms apart: %d with grpc-go's defaults, %d with client.Dial", events, plain, ours)
}

// TestDialLargeMessage sends a message twice the stream window through a
// connection of Dial, as a large List page is: a fixed window must not
// stall it.
func TestDialLargeMessage(t *testing.T) {
	size := 2 * client.StreamWindow
	pingsSent(t, trickle{events: 3, big: size}, func(addr string) (*grpc.ClientConn, error) {
		return client.Dial(client.Config{Address: addr}, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(size+1024)))
	})
}
