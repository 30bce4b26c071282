//go:build linux

package transport_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/informerd/informerd/internal/transport"
)

// syncBuffer is a log sink the accepting goroutine writes and the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

// clock is a settable clock for the log's rate limit.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// peerServer listens on a real Unix socket, admitting allowed, and
// returns the socket's path and the connections the listener let through.
func peerServer(t *testing.T, allowed []uint32, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (string, <-chan net.Conn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "informerd.sock")
	l, err := transport.Listen("--grpc-address", "unix://"+path, transport.Socket{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := transport.NewPeers(transport.PeerOptions{AllowedUIDs: allowed, Registerer: reg, Log: log, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	pl := p.Listener("grpc", l)
	accepted := make(chan net.Conn, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := pl.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept: %v", err)
				}
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		pl.Close()
		<-done
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	})
	return path, accepted
}

// refusedByServer connects to path and reports whether the server closed
// the connection without a word (the client reads EOF) rather than
// accepting it (it arrives on accepted).
func refusedByServer(t *testing.T, path string, accepted <-chan net.Conn) bool {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case srv := <-accepted:
		srv.Close()
		<-read
		return false
	case err := <-read:
		return errors.Is(err, io.EOF)
	}
}

// TestPeersRefuse: a process of a uid not in the allowed list (this
// test's own, left out) is closed at accept, before anything is read,
// never handed to the server, counted, and logged once a minute per uid
// with the refusals left out in between.
func TestPeersRefuse(t *testing.T) {
	self := uint32(os.Getuid())
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	path, accepted := peerServer(t, []uint32{self + 1}, reg, slog.New(slog.NewJSONHandler(&logs, nil)), clk.now)

	for i, step := range []time.Duration{0, 10 * time.Second, 30 * time.Second, transport.PeerLogInterval} {
		clk.add(step)
		if !refusedByServer(t, path, accepted) {
			t.Fatalf("connection %d from uid %d (not allowed) was not closed by the server", i+1, self)
		}
	}
	if n := len(accepted); n != 0 {
		t.Errorf("%d refused connections reached the server", n)
	}
	if got := refused(t, reg, "grpc", "uid"); got != 4 {
		t.Errorf("informerd_unix_socket_refused_total{reason=uid} = %v, want 4", got)
	}
	var logged []map[string]any
	for _, line := range logs.lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		logged = append(logged, map[string]any{"uid": m["uid"], "refusedUnlogged": m["refusedUnlogged"], "listener": m["listener"]})
	}
	want := []map[string]any{
		{"uid": float64(self), "refusedUnlogged": float64(0), "listener": "grpc"},
		{"uid": float64(self), "refusedUnlogged": float64(2), "listener": "grpc"},
	}
	if diff := cmp.Diff(want, logged); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

// TestPeersAdmit: with this test's uid in the list, the connection is
// handed to the server and carries data both ways.
func TestPeersAdmit(t *testing.T) {
	reg := prometheus.NewRegistry()
	path, accepted := peerServer(t, []uint32{12345, uint32(os.Getuid())}, reg, nil, nil)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := <-accepted
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(srv, b); err != nil || b[0] != 'x' {
		t.Fatalf("the server read %q, %v; want x", b, err)
	}
	if got := refused(t, reg, "grpc", "uid"); got != 0 {
		t.Errorf("informerd_unix_socket_refused_total{reason=uid} = %v, want 0", got)
	}
}

func TestParseUIDs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []uint32
		err  bool
	}{
		{name: "empty", in: ""},
		{name: "two", in: "1000, 65532,", want: []uint32{1000, 65532}},
		{name: "a name", in: "nobody", err: true},
		{name: "negative", in: "-1", err: true},
		{name: "past 32 bits", in: "4294967296", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := transport.ParseUIDs(tc.in)
			if (err != nil) != tc.err || (err != nil && !strings.Contains(err.Error(), "--unix-socket-allowed-uids")) {
				t.Fatalf("err %v, want an error naming the flag: %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := transport.NewPeers(transport.PeerOptions{}); err == nil {
		t.Error("NewPeers with no uid: no error, yet every connection would be refused")
	}
}

// refused is informerd_unix_socket_refused_total{listener, reason} as
// gathered from reg.
func refused(t *testing.T, reg *prometheus.Registry, listener, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "informerd_unix_socket_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["listener"] == listener && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no informerd_unix_socket_refused_total{listener=%q, reason=%q}", listener, reason)
	return 0
}
