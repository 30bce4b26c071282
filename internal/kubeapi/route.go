package kubeapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/informerd/informerd/internal/pipeline"
)

// kind is what informerd does with a request, decided once, in withRoute,
// from its canonical path, method and headers.
type kind int

const (
	// kindForward: the API server answers, with the caller's own credentials.
	kindForward kind = iota
	// kindPublic: forwarded too, but also without credentials, as the API
	// server answers /version and its health checks to anyone.
	kindPublic
	// kindDiscovery: answered from the API server's discovery, to an
	// authenticated caller.
	kindDiscovery
	// kindCached: get, list or watch answered from a cache.
	kindCached
)

// facts are a request's facts, derived once from its path, method and
// headers and passed on in its context: no later step reads the raw path
// or query again to decide anything.
type facts struct {
	kind kind
	info *request.RequestInfo
	// res is the cache a cached read reads, and namespace where in it: the
	// request's namespace for a namespaced resource, "" for a
	// cluster-scoped one (the scope from the resource's discovery).
	res       pipeline.Served
	namespace string
	// impersonation keeps a cached read's Impersonate-* headers, which
	// the impersonation filter removes, for when the read is forwarded
	// after all (a resourceVersion ahead of the cache).
	impersonation http.Header
	// out is what a cached read answers in, negotiated by serve.
	out *output
	// gzip is a compressed WatchList's writer (withCompression), which a
	// watch offers the shared gzip member of a frame it writes alone.
	gzip *flushGzip
}

type factsKey struct{}

// factsOf returns the facts withRoute put in r's context.
func factsOf(r *http.Request) *facts {
	f, _ := r.Context().Value(factsKey{}).(*facts)
	return f
}

func withFacts(ctx context.Context, f *facts) context.Context {
	return context.WithValue(ctx, factsKey{}, f)
}

// withRoute decides, once per request, whether informerd answers it
// (a cached read or discovery, through the auth chain in self) or forwards
// it (fwd), and puts that decision and the request's RequestInfo in its
// context. It runs after withCanonicalPath, so it decides on the path the
// forwarder sends upstream.
func (h *Handler) withRoute(self, fwd http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := h.infos.NewRequestInfo(r)
		if err != nil {
			writeStatus(w, badRequest("cannot parse the request path: "+err.Error()))
			return
		}
		f := &facts{kind: kindForward, info: info}
		switch {
		case !info.IsResourceRequest && isPublic(info.Path):
			f.kind = kindPublic
		case impersonates(r) && h.opts.Impersonation == nil:
			// Who the impersonated user is, and what it may read, only
			// the API server can tell in this auth mode: it answers.
		case !info.IsResourceRequest && h.discovery.serves(r):
			f.kind = kindDiscovery
		case info.IsResourceRequest && r.Method == http.MethodGet:
			// RequestInfo reads HEAD as get; the API server routes no
			// HEAD for resources (405), so it answers that.
			f.res, f.namespace = h.lookup(info)
			if f.res == nil && readVerb(info) {
				// The read may be of a resource a cache is still looking
				// up: forwarded, it would reach the API server without the
				// caller's credentials. It waits as for a cache not synced
				// yet.
				var busy bool
				if f.res, f.namespace, busy = h.awaitResolved(r, info); busy {
					initializing(w, "storage is (re)initializing: informerd is starting, and its caches are still looking their resources up in the API server's discovery")
					return
				}
			}
			if f.res != nil {
				f.kind = kindCached
			}
		}
		ctx := request.WithRequestInfo(withFacts(r.Context(), f), info)
		r = r.WithContext(ctx)
		if f.kind == kindCached {
			if impersonates(r) {
				f.impersonation = impersonationHeaders(r.Header)
			}
			// Counted here, so that the auth filters' refusals are too.
			start := time.Now()
			rec := &recorder{ResponseWriter: w, code: http.StatusOK}
			defer func() { h.opts.Observer.Request(f.res.Name(), info.Verb, rec.code, time.Since(start)) }()
			self.ServeHTTP(rec, r)
			return
		}
		if f.kind == kindDiscovery {
			self.ServeHTTP(w, r)
			return
		}
		fwd.ServeHTTP(w, r)
	})
}

// isPublic reports whether the API server answers p to anyone, credentials
// or not (the system:public-info-viewer ClusterRole): /version and the
// health checks.
func isPublic(p string) bool {
	if p == "/version" || p == "/version/" {
		return true
	}
	for _, h := range []string{"/healthz", "/livez", "/readyz"} {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// impersonationHeaders returns a copy of h's Impersonate-* headers.
func impersonationHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if isImpersonation(k) {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

func isImpersonation(k string) bool {
	return k == authenticationv1.ImpersonateUserHeader || k == authenticationv1.ImpersonateGroupHeader ||
		k == authenticationv1.ImpersonateUIDHeader || strings.HasPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix)
}

// impersonates reports whether r asks to act as another user.
func impersonates(r *http.Request) bool {
	for k := range r.Header {
		if isImpersonation(k) {
			return true
		}
	}
	return false
}
