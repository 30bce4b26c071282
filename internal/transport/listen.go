package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const unixPrefix = "unix://"

// DefaultSocketMode is the file mode of a Unix socket whose Socket.Mode is
// zero, and the default of --unix-socket-mode.
const DefaultSocketMode os.FileMode = 0o660

// Unix says whether addr names a Unix socket (unix:///path).
func Unix(addr string) bool { return strings.HasPrefix(addr, unixPrefix) }

// Loopback says whether a TCP host:port listens only on loopback.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Socket sets the file mode and owner of a Unix socket.
type Socket struct {
	// Mode is the socket file's permission bits, e.g. 0o660; zero means
	// DefaultSocketMode.
	Mode os.FileMode
	// Owner is "uid", "uid:gid" or ":gid" (numbers); empty keeps the
	// process's own.
	Owner string
}

// Listen opens addr: a TCP host:port or, with the unix:// prefix, a Unix
// socket with sock's mode and owner. flag names the address in errors.
func Listen(flag, addr string, sock Socket) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, unixPrefix)
	if !ok {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s %s: %w", flag, addr, err)
		}
		return l, nil
	}
	if path == "" {
		return nil, fmt.Errorf("%s %s: no socket path; write unix:///path/to/informerd.sock", flag, addr)
	}
	uid, gid, err := parseOwner(sock.Owner)
	if err != nil {
		return nil, err
	}
	// A socket left by a previous run blocks Listen; anything else at that
	// path is not ours to delete.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	// The socket is created owner-only and opened up below: with the
	// process's umask it could be connectable by anyone until the chmod.
	// (Listen runs at start, before other goroutines create files.)
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s %s: %w", flag, addr, err)
	}
	mode := sock.Mode
	if mode == 0 {
		mode = DefaultSocketMode
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s: set mode %o on %s: %w", flag, mode, path, err)
	}
	if uid != -1 || gid != -1 {
		if err := os.Lchown(path, uid, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("%s: set owner %s on %s: %w (changing the owner needs CAP_CHOWN; or run as that user)", flag, sock.Owner, path, err)
		}
	}
	return l, nil
}

// parseOwner reads "uid", "uid:gid" or ":gid"; -1 means unchanged.
func parseOwner(s string) (uid, gid int, err error) {
	uid, gid = -1, -1
	if s == "" {
		return uid, gid, nil
	}
	u, g, hasGroup := strings.Cut(s, ":")
	bad := fmt.Errorf("--unix-socket-owner %q: want numeric uid, uid:gid or :gid", s)
	if u != "" {
		if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
			return 0, 0, bad
		}
	}
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, bad
		}
	}
	if uid == -1 && gid == -1 {
		return 0, 0, bad
	}
	return uid, gid, nil
}

// Security is what informerd is asked to serve with.
type Security struct {
	// Address is the gRPC listen address.
	Address string
	// TLS and ClientCA say whether TLS and client certificates are on.
	TLS, ClientCA bool
	// AuthMode is none, kubernetes or mtls.
	AuthMode string
	// AllowPlaintext permits plaintext TCP on a non-loopback address.
	AllowPlaintext bool
}

// ErrInsecure is returned for a combination that would expose the cache.
var ErrInsecure = errors.New("transport: insecure configuration")

// Check refuses a configuration that lets a network peer read the cache
// without a check, and says which flags fix it. It returns a warning to log
// loudly when plaintext TCP is allowed on a non-loopback address.
func (s Security) Check() (warning string, err error) {
	local := Unix(s.Address) || Loopback(s.Address)
	switch s.AuthMode {
	case "none":
		if !local {
			return "", fmt.Errorf("%w: --auth-mode=none serves the cache to anyone who can connect, so it is allowed only on a Unix socket or a loopback address, not %s; "+
				"use --auth-mode=kubernetes (or mtls), or listen on unix:///path or 127.0.0.1", ErrInsecure, s.Address)
		}
	case "kubernetes":
	case "mtls":
		if !s.TLS || !s.ClientCA {
			return "", fmt.Errorf("%w: --auth-mode=mtls needs client certificates: set --tls-cert-file, --tls-key-file and --tls-client-ca-file", ErrInsecure)
		}
	default:
		return "", fmt.Errorf("--auth-mode %q: want none, kubernetes or mtls", s.AuthMode)
	}
	if s.TLS || local {
		return "", nil
	}
	if !s.AllowPlaintext {
		return "", fmt.Errorf("%w: plaintext gRPC on %s, which is not loopback, would send tokens and objects in the clear; "+
			"set --tls-cert-file and --tls-key-file, or listen on a Unix socket or loopback, or (inside a trusted network only) pass --insecure-allow-plaintext", ErrInsecure, s.Address)
	}
	return fmt.Sprintf("INSECURE: serving plaintext gRPC on %s, a non-loopback address (--insecure-allow-plaintext): anyone on the network path can read tokens and objects", s.Address), nil
}
