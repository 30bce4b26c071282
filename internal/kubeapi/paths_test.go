package kubeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/kubeapi"
)

// informerdToken is informerd's own credential towards the fake API server.
const informerdToken = "informerd-own-token"

// upstreamLog records what reached the fake API server, and with which
// Authorization header.
type upstreamLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct{ path, authz string }

func (l *upstreamLog) requests() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenRequest(nil), l.seen...)
}

// tokenAuthn stands in for --auth-mode kubernetes: "Bearer good" is alice,
// anything else is refused as the TokenReview would refuse it.
type tokenAuthn struct{}

func (tokenAuthn) Authenticate(ctx context.Context) (user.Info, error) {
	tok, err := auth.BearerToken(ctx)
	if err != nil {
		return nil, err
	}
	if tok != "good" {
		return nil, &auth.Error{Kind: auth.Unauthenticated, Msg: "token rejected"}
	}
	return &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}, nil
}

// pathFixture is informerd's Kubernetes API, caching nothing, in front of
// a fake API server that records every request.
func pathFixture(t testing.TB) (http.Handler, *upstreamLog) {
	t.Helper()
	log := &upstreamLog{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.seen = append(log.seen, seenRequest{path: r.URL.EscapedPath(), authz: r.Header.Get("Authorization")})
		log.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(api.Close)
	h, err := kubeapi.New(kubeapi.Options{
		Caches:        noCaches{},
		Upstream:      &rest.Config{Host: api.URL, BearerToken: informerdToken},
		Authenticator: tokenAuthn{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h, log
}

// TestPathsAndCredentials: a path that is not canonical is the API
// server's 404 before any routing; discovery is fetched with informerd's
// credentials only for an authenticated caller and only at the path asked
// for; everything else leaves with the caller's credentials or none.
func TestPathsAndCredentials(t *testing.T) {
	tests := []struct {
		name, path, token string
		code              int
		// upstream is the request the fake API server must see, "" none;
		// authz its Authorization header.
		upstream, authz string
	}{
		{name: "dot-dot to /metrics", path: "/apis/../metrics", token: "good", code: 404},
		{name: "escaped dot-dot", path: "/apis/%2e%2e/metrics", token: "good", code: 404},
		{name: "dot-dot inside a name", path: "/api/v1/namespaces/default/configmaps/a%2F..%2F..%2F..%2F..%2Fmetrics", token: "good", code: 404},
		{name: "dot segment", path: "/apis/./apps", code: 404},
		{name: "empty segment", path: "/api//v1", token: "good", code: 404},
		{name: "double slash first", path: "//api", token: "good", code: 404},
		{name: "discovery without credentials", path: "/apis", code: 401},
		{name: "discovery with a bad token", path: "/api", token: "bad", code: 401},
		{name: "discovery, authenticated", path: "/apis/apps/v1", token: "good", code: 200, upstream: "/apis/apps/v1", authz: "Bearer " + informerdToken},
		{name: "/metrics is forwarded with the caller's token", path: "/metrics", token: "good", code: 200, upstream: "/metrics", authz: "Bearer good"},
		{name: "/metrics without a token is not forwarded", path: "/metrics", code: 401},
		{name: "/version is forwarded, with no credentials", path: "/version", code: 200, upstream: "/version", authz: ""},
		{name: "/version with the caller's token", path: "/version", token: "bad", code: 200, upstream: "/version", authz: "Bearer bad"},
		{name: "/livez is public", path: "/livez/ping", code: 200, upstream: "/livez/ping", authz: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, log := pathFixture(t)
			r := httptest.NewRequest(http.MethodGet, "http://informerd"+tt.path, nil)
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.code {
				t.Errorf("GET %s: %d %s, want %d", tt.path, w.Code, w.Body, tt.code)
			}
			seen := log.requests()
			if tt.upstream == "" {
				if len(seen) != 0 {
					t.Errorf("GET %s reached the API server: %+v", tt.path, seen)
				}
				return
			}
			if len(seen) != 1 || seen[0].path != tt.upstream || seen[0].authz != tt.authz {
				t.Errorf("GET %s: the API server saw %+v, want one request %s with Authorization %q", tt.path, seen, tt.upstream, tt.authz)
			}
		})
	}
}

// FuzzOwnCredentials: no path and headers make informerd send a request
// with its own credentials anywhere but to the discovery path the caller
// asked for, and only for an authenticated caller.
func FuzzOwnCredentials(f *testing.F) {
	for _, s := range []string{"/apis/../metrics", "/apis/%2e%2e/metrics", "/apis", "/api/v1", "/version", "/metrics", "/apis/a%2Fb/c", "/api/v1/namespaces/x/pods", "/apis/g/v/"} {
		f.Add(s, "GET", "good", "Impersonate-User", "x")
		f.Add(s, "HEAD", "", "Accept", "application/json")
	}
	h, log := pathFixture(f)
	f.Fuzz(func(t *testing.T, path, method, token, hk, hv string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || !strings.HasPrefix(path, "/") || !validMethod(method) {
			return
		}
		r, err := http.NewRequest(method, "http://informerd"+u.RequestURI(), nil)
		if err != nil {
			return
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if hk != "" && validHeader(hk) && validHeader(hv) && !strings.EqualFold(hk, "Authorization") {
			r.Header.Set(hk, hv)
		}
		before := len(log.requests())
		h.ServeHTTP(httptest.NewRecorder(), r)
		for _, s := range log.requests()[before:] {
			if s.authz != "Bearer "+informerdToken {
				continue
			}
			if token != "good" {
				t.Fatalf("%s %q (token %q): informerd's credentials sent to %s for an unauthenticated caller", method, path, token, s.path)
			}
			if !discoveryShape(s.path) || !samePath(strings.TrimSuffix(r.URL.EscapedPath(), "/"), s.path) {
				t.Fatalf("%s %q: informerd's credentials sent to %s", method, path, s.path)
			}
		}
	})
}

// samePath: two escaped paths name the same segments. Escaping may differ
// ("!" and "%21" are one character), but an escaped "/" stays inside its
// segment.
func samePath(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		x, errx := url.PathUnescape(as[i])
		y, erry := url.PathUnescape(bs[i])
		if errx != nil || erry != nil || x != y {
			return false
		}
	}
	return true
}

// discoveryShape: /api, /apis, /api/v, /apis/g, /apis/g/v.
func discoveryShape(p string) bool {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case segs[0] == "api":
		return len(segs) <= 2
	case segs[0] == "apis":
		return len(segs) <= 3
	}
	return false
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return true
	}
	return false
}

func validHeader(s string) bool {
	for _, c := range s {
		if c < 0x21 || c > 0x7e || c == ':' {
			return false
		}
	}
	return s != ""
}
