package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// discovery answers API discovery (/api, /apis, a group, a group-version,
// and the aggregated form kubectl asks for) to authenticated callers with
// the API server's own answers, fetched with informerd's credentials for
// each request. So a client without credentials for the API server still
// finds every resource, the cached ones and the forwarded ones alike. Not
// kept: a CRD or APIService created or removed shows in discovery through
// informerd as soon as the API server shows it (clients that create a CRD
// wait for it there); the caller's If-None-Match goes upstream, so an
// unchanged aggregated document is a 304 without a body. It fetches
// nothing else: /version, which depends on the caller (impersonation, API
// Priority and Fairness headers), is forwarded.
type discovery struct {
	api *apiServer
}

// maxDiscoveryBytes bounds one discovery answer.
const maxDiscoveryBytes = 16 << 20

func newDiscovery(api *apiServer) *discovery { return &discovery{api: api} }

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

// discoveryHeaders are the API server's response headers a discovery
// answer passes on.
var discoveryHeaders = []string{"Content-Type", "ETag", "Cache-Control", "Vary", "X-Varied-Accept"}

func (h *Handler) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := http.StatusServiceUnavailable
	defer func() { h.opts.Observer.Request("", "discovery", code, time.Since(start)) }()
	resp, body, err := h.discovery.get(r.Context(), strings.TrimSuffix(r.URL.Path, "/"), r.Header)
	if err != nil {
		writeStatus(w, unavailable(fmt.Sprintf("informerd cannot read API discovery from the API server: %v", err)))
		return
	}
	for _, k := range discoveryHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			w.Header()[k] = v
		}
	}
	code = resp.StatusCode
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// get returns the API server's answer to path for the request's Accept and
// If-None-Match headers, its body read whole (at most maxDiscoveryBytes).
func (d *discovery) get(ctx context.Context, path string, in http.Header) (*http.Response, []byte, error) {
	resp, err := d.api.do(ctx, path, "", http.Header{"Accept": in.Values("Accept"), "If-None-Match": in.Values("If-None-Match")})
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > maxDiscoveryBytes {
		return nil, nil, fmt.Errorf("the answer to %s is larger than %d bytes", path, maxDiscoveryBytes)
	}
	return resp, body, nil
}
