package server

import (
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// numberedCreds are the server's transport credentials, which give every
// connection without an address of its own a number in its remote address
// (peer.Addr), so that limits per connection can tell connections apart.
// The peers of a Unix socket are unnamed: all of them have the same
// address. A TCP connection keeps its host:port, which names it already,
// and its *net.TCPConn, which grpc tunes.
//
// A stats.Handler's TagConn would number connections too, but grpc then
// builds a stats.OutPayload for every message sent; this costs nothing per
// message.
type numberedCreds struct {
	credentials.TransportCredentials
	next *atomic.Uint64
}

// numbered returns creds (plaintext when nil) that number connections.
func numbered(creds credentials.TransportCredentials) credentials.TransportCredentials {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &numberedCreds{TransportCredentials: creds, next: new(atomic.Uint64)}
}

// ServerHandshake implements credentials.TransportCredentials.
func (c *numberedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		// Unwrapped: grpc compares it with credentials.ErrConnDispatched
		// and io.EOF.
		return nil, nil, err
	}
	if _, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return conn, info, nil
	}
	return &numberedConn{Conn: conn, remote: newConnAddr(conn.RemoteAddr(), c.next.Add(1))}, info, nil
}

// Clone implements credentials.TransportCredentials.
func (c *numberedCreds) Clone() credentials.TransportCredentials {
	return &numberedCreds{TransportCredentials: c.TransportCredentials.Clone(), next: c.next}
}

// numberedConn is a connection with a numbered remote address.
type numberedConn struct {
	net.Conn
	remote connAddr
}

func (c *numberedConn) RemoteAddr() net.Addr { return c.remote }

// connAddr is the address of a connection's peer with the connection's
// number: "unix#12", "@informerd#3".
type connAddr struct {
	network, name string
}

func newConnAddr(a net.Addr, n uint64) connAddr {
	network, name := "unix", ""
	if a != nil {
		network, name = a.Network(), a.String()
	}
	if name == "" || name == "@" {
		name = network
	}
	return connAddr{network: network, name: fmt.Sprintf("%s#%d", name, n)}
}

func (a connAddr) Network() string { return a.network }
func (a connAddr) String() string  { return a.name }
