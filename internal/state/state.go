// Package state keeps each cached resource on disk (--state-dir), so that a
// restarted informerd serves at once, resumes its upstream watch from where
// it stopped and keeps every client's resourceVersion valid.
//
// A resource's state is one bbolt file (etcd's storage engine): the objects
// at the start of the history window, the window's events, and the position
// (resourceVersion and sequence numbers) they reach. A Resource's Run
// writes the cache's changes in batches off the hot path: the cache tells it
// of each event (a counter and a non-blocking signal), and Run reads the
// events from the cache's own history when a batch is due, by count or by
// time. Load reads a state back and checks it — format version, the API
// server and configuration it was written for, a CRC on every value, the
// order of the history — and sets a state that fails any check aside,
// never serving it.
package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Defaults of the write cadence.
const (
	DefaultFlushInterval = time.Second
	DefaultFlushEvents   = 1000
)

// Identity names the cluster a state belongs to: the API server's URL and
// the SHA-256 of the CA bundle that authenticates it. Both are known
// without asking the API server, so a restart checks a state before the
// API server answers; a cluster rebuilt behind the same URL has a new CA.
// Cluster is the uid of the cluster's kube-system namespace (ClusterUID),
// when the API server answered at start: a cluster rebuilt behind the same
// URL and CA has a new one. Empty when unknown, and then not compared.
type Identity struct {
	Server  string
	CA      string
	Cluster string
}

// IdentityOf returns the identity of the API server c talks to.
func IdentityOf(c *rest.Config) (Identity, error) {
	ca := c.TLSClientConfig.CAData
	if len(ca) == 0 && c.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(c.TLSClientConfig.CAFile)
		if err != nil {
			return Identity{}, fmt.Errorf("read the API server's CA bundle: %w", err)
		}
		ca = b
	}
	id := Identity{Server: c.Host}
	if len(ca) > 0 {
		sum := sha256.Sum256(ca)
		id.CA = hex.EncodeToString(sum[:])
	}
	return id, nil
}

// Source is what of a resource's configuration decides which objects its
// cache holds and what bytes it stores: a state written under another
// Source is another cache. Indexes are not part of it: they are computed
// again from the stored bytes.
type Source struct {
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	FieldSelector      string `json:"fieldSelector,omitempty"`
	StripManagedFields bool   `json:"stripManagedFields"`
	// Upstream is a leaf's upstreamSelector, the part of its upstream
	// informerd's objects it takes, in a canonical form; empty for a
	// resource taken from the API server.
	Upstream string `json:"upstream,omitempty"`
}

// Resolved is what discovery resolved a resource to.
type Resolved struct {
	Group      string `json:"group"`
	Version    string `json:"version"`
	Resource   string `json:"resource"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}

// Options configure a state directory.
type Options struct {
	// Dir is the directory; it is created if missing.
	Dir string
	// FlushInterval is the longest a change waits before a write starts;
	// FlushEvents the most changes that wait.
	FlushInterval time.Duration
	FlushEvents   int
	// Identity is the cluster's.
	Identity Identity
	Log      *slog.Logger

	// openFile opens the database files; nil is os.OpenFile. Tests point
	// it at /dev/full.
	openFile func(string, int, os.FileMode) (*os.File, error)
}

// Dir is an open state directory, locked against a second informerd.
type Dir struct {
	opts Options
	lock *os.File
}

// Open creates and locks the state directory.
func Open(o Options) (*Dir, error) {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.FlushEvents <= 0 {
		o.FlushEvents = DefaultFlushEvents
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(o.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--state-dir %s is in use by another informerd; give each process its own directory", o.Dir)
		}
		return nil, fmt.Errorf("--state-dir %s: lock: %w", o.Dir, err)
	}
	return &Dir{opts: o, lock: f}, nil
}

// Close releases the lock. Resources must have stopped.
func (d *Dir) Close() error { return d.lock.Close() }

// Path is the directory's path.
func (d *Dir) Path() string { return d.opts.Dir }

// Resource returns the state of the configured resource name, read from
// src. It opens nothing; Load and Run do.
func (d *Dir) Resource(name string, src Source) *Resource {
	return newResource(d, name, src)
}

// fileName maps a configured resource name ("pods", "deployments.apps") to
// its file: characters other than letters, digits, '.', '-' and '_' become
// '_'.
func fileName(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b) + ".db"
}
