package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of informerd_unix_socket_refused_total.
const (
	refusedUID     = "uid"
	refusedUnknown = "no_credentials"
)

// Peers admits to a Unix socket only the processes of allowed users: at
// accept, the kernel's credentials of the connecting process (SO_PEERCRED,
// taken at connect and not forgeable by the peer) are read, and a
// connection from any other uid is closed before a byte is read from it.
// Each refusal is counted; the first of each uid is logged, then at most
// one line per uid and PeerLogInterval, with the refusals left out.
//
// Peers is safe for concurrent use, by any number of listeners.
type Peers struct {
	allowed []uint32
	refused *prometheus.CounterVec
	log     *slog.Logger
	now     func() time.Time
	limiter logLimiter
}

// PeerOptions configure Peers.
type PeerOptions struct {
	// AllowedUIDs are the users whose processes may connect, as the
	// listener's user namespace sees them.
	AllowedUIDs []uint32
	// Registerer receives informerd_unix_socket_refused_total; may be nil.
	Registerer prometheus.Registerer
	// Log receives the refusals, rate limited per uid.
	Log *slog.Logger
	// Now is the clock of the log's rate limit; nil is time.Now.
	Now func() time.Time
}

// PeerLogInterval is the least time between two log lines about one uid's
// refused connections.
const PeerLogInterval = time.Minute

// maxLoggedUIDs bounds the uids whose last log line Peers remembers; past
// it, refusals of new uids are counted but not logged until an entry ages
// out.
const maxLoggedUIDs = 1024

// ErrPeerCredentials is returned by NewPeers where the kernel does not
// tell a Unix socket's peer (SO_PEERCRED is Linux's).
var ErrPeerCredentials = errors.New("transport: peer credentials of Unix sockets are not available on this system")

// NewPeers returns the check of o's users.
func NewPeers(o PeerOptions) (*Peers, error) {
	if !peerCredentialsSupported {
		return nil, ErrPeerCredentials
	}
	if len(o.AllowedUIDs) == 0 {
		return nil, errors.New("transport: no allowed uids: every connection would be refused")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &Peers{
		allowed: slices.Clone(o.AllowedUIDs),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_unix_socket_refused_total",
			Help: "Connections to a Unix socket closed at accept: reason=uid, the peer's user is not in --unix-socket-allowed-uids; reason=no_credentials, the kernel did not tell the peer's credentials.",
		}, []string{"listener", "reason"}),
		log:     o.Log,
		now:     o.Now,
		limiter: logLimiter{last: map[int64]logEntry{}},
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(p.refused)
	}
	return p, nil
}

// Listener returns l, a Unix socket's listener, admitting only the
// allowed users' connections; name ("grpc", "kube-api") labels its
// refusals. Its Accept returns only admitted connections and the errors
// of l.
func (p *Peers) Listener(name string, l net.Listener) net.Listener {
	for _, reason := range []string{refusedUID, refusedUnknown} {
		p.refused.WithLabelValues(name, reason) // shown at 0 from the start
	}
	return &peerListener{Listener: l, name: name, peers: p}
}

// admit reports whether c's peer may stay connected, and counts and logs
// a refusal.
func (p *Peers) admit(name string, c net.Conn) bool {
	cred, err := peerCredentials(c)
	if err != nil {
		p.refused.WithLabelValues(name, refusedUnknown).Inc()
		if left, ok := p.limiter.allow(unknownUID, p.now()); ok {
			p.log.Warn("refused a connection to the Unix socket: its peer's credentials could not be read", "listener", name, "err", err, "refusedUnlogged", left)
		}
		return false
	}
	if slices.Contains(p.allowed, cred.uid) {
		return true
	}
	p.refused.WithLabelValues(name, refusedUID).Inc()
	if left, ok := p.limiter.allow(int64(cred.uid), p.now()); ok {
		p.log.Warn("refused a connection to the Unix socket from a user not in --unix-socket-allowed-uids",
			"listener", name, "uid", cred.uid, "gid", cred.gid, "pid", cred.pid, "refusedUnlogged", left)
	}
	return false
}

// peerListener is a Unix socket's listener that closes the connections
// of users Peers does not admit.
type peerListener struct {
	net.Listener
	name  string
	peers *Peers
}

// Accept implements net.Listener. A refused connection is closed and the
// next one accepted: a refusal is no error of the listener, which would
// stop the server.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.peers.admit(l.name, c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// credentials are a Unix socket peer's, as the kernel took them at
// connect.
type credentials struct {
	pid      int32
	uid, gid uint32
}

// unknownUID is the logLimiter key of peers whose credentials could not
// be read.
const unknownUID = -1

// logLimiter allows one log line per uid (unknownUID for none) and
// PeerLogInterval, and counts the refusals it held back. Safe for
// concurrent use.
type logLimiter struct {
	mu   sync.Mutex
	last map[int64]logEntry
}

type logEntry struct {
	at      time.Time
	skipped int
}

// allow reports whether a refusal of uid at now is logged, and how many
// refusals of uid were not logged since its last line.
func (l *logLimiter) allow(uid int64, now time.Time) (skipped int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, seen := l.last[uid]
	if seen && now.Sub(e.at) < PeerLogInterval {
		e.skipped++
		l.last[uid] = e
		return 0, false
	}
	if !seen && len(l.last) >= maxLoggedUIDs {
		for u, old := range l.last {
			if now.Sub(old.at) >= PeerLogInterval {
				delete(l.last, u)
			}
		}
		if len(l.last) >= maxLoggedUIDs {
			return 0, false
		}
	}
	l.last[uid] = logEntry{at: now}
	return e.skipped, true
}

// ParseUIDs reads a comma-separated list of numeric uids
// (--unix-socket-allowed-uids); empty is none.
func ParseUIDs(s string) ([]uint32, error) {
	var out []uint32
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		u, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--unix-socket-allowed-uids %q: %q is not a numeric uid", s, f)
		}
		out = append(out, uint32(u))
	}
	return out, nil
}
