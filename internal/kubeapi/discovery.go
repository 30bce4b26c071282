package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// discovery answers API discovery (/api, /apis, a group, a group-version,
// and the aggregated form kubectl asks for) to authenticated callers with
// the API server's own answers, fetched with informerd's credentials and
// reused for a TTL. So a client without credentials for the API server
// still finds every resource, the cached ones and the forwarded ones alike.
// It fetches nothing else: /version, which depends on the caller
// (impersonation, API Priority and Fairness headers), is forwarded.
type discovery struct {
	api *apiServer
	ttl time.Duration

	mu      sync.Mutex
	answers map[discoveryKey]*discoveryAnswer
}

type discoveryKey struct{ path, accept string }

type discoveryAnswer struct {
	fetched     time.Time
	contentType string
	etag        string
	body        []byte
}

// Bounds of the discovery cache: the answers kept (one per path and Accept
// header) and the size of one.
const (
	maxDiscoveryAnswers = 256
	maxDiscoveryBytes   = 16 << 20
)

func newDiscovery(api *apiServer, ttl time.Duration) *discovery {
	return &discovery{api: api, ttl: ttl, answers: map[discoveryKey]*discoveryAnswer{}}
}

// serves reports whether r is a discovery request. Its path is canonical
// (withCanonicalPath), so the path fetched is the path asked for.
func (d *discovery) serves(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/api", p == "/apis":
		return true
	case strings.HasPrefix(p, "/api/"):
		return strings.Count(p, "/") == 2 // /api/v1
	case strings.HasPrefix(p, "/apis/"):
		n := strings.Count(p, "/")
		return n == 2 || n == 3 // /apis/group, /apis/group/version
	}
	return false
}

func (h *Handler) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a, code, err := h.discovery.get(r.Context(), strings.TrimSuffix(r.URL.Path, "/"), r.Header.Get("Accept"))
	defer func() { h.opts.Observer.Request("", "discovery", code, time.Since(start)) }()
	if err != nil {
		writeStatus(w, unavailable(fmt.Sprintf("informerd cannot read API discovery from the API server: %v", err)))
		code = http.StatusServiceUnavailable
		return
	}
	if code != http.StatusOK {
		w.Header().Set("Content-Type", a.contentType)
		w.WriteHeader(code)
		_, _ = w.Write(a.body)
		return
	}
	if a.etag != "" {
		w.Header().Set("ETag", a.etag)
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			code = http.StatusNotModified
			return
		}
	}
	w.Header().Set("Content-Type", a.contentType)
	_, _ = w.Write(a.body)
}

// get returns the API server's answer to path for accept, from the cache
// while it is fresh. Only 200 answers are kept.
func (d *discovery) get(ctx context.Context, path, accept string) (*discoveryAnswer, int, error) {
	key := discoveryKey{path, accept}
	d.mu.Lock()
	a, ok := d.answers[key]
	d.mu.Unlock()
	if ok && time.Since(a.fetched) < d.ttl {
		return a, http.StatusOK, nil
	}
	resp, err := d.api.get(ctx, path, "", accept)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(body) > maxDiscoveryBytes {
		return nil, 0, fmt.Errorf("the answer to %s is larger than %d bytes", path, maxDiscoveryBytes)
	}
	a = &discoveryAnswer{fetched: time.Now(), contentType: resp.Header.Get("Content-Type"), etag: resp.Header.Get("ETag"), body: body}
	if resp.StatusCode == http.StatusOK {
		d.mu.Lock()
		if len(d.answers) >= maxDiscoveryAnswers {
			clear(d.answers) // Accept headers vary little; start over
		}
		d.answers[key] = a
		d.mu.Unlock()
	}
	return a, resp.StatusCode, nil
}
