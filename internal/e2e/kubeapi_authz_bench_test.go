package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
)

// BenchmarkKubeAPIAuthorization measures what the checks before a cached
// read cost, one request at a time through informerd's Kubernetes API over
// TLS against the real API server's reviews:
//
//   - review=warm: every decision in informerd's SubjectAccessReview cache
//     (the default 10 s TTL), so the read costs the filters and the cache
//     lookups only;
//   - review=cold: the decision cache off (a 1 ns TTL), so each read waits
//     for its reviews at the API server: one for the read, and with
//     impersonation one per impersonated attribute before it;
//   - read=plain: reader gets a Secret; read=impersonated: imp gets it as
//     boss (Impersonate-User); read=selector: kubelet, as system:node:n1,
//     lists the pods of its node (the review carries the field selector);
//   - audit=on|off: the audit log (the API server's policy, level Metadata
//     for the namespace, blocking) against none, warm.
//
// Every read has resourceVersion=0, so that it measures the checks and
// not a consistent read's round trip to the API server.
//
// Run with `make bench-authz`; docs/benchmarks/authz.md has the figures.
func BenchmarkKubeAPIAuthorization(b *testing.B) {
	ns := "/api/v1/namespaces/" + testenv.AuditNamespace
	reads := []struct {
		name, sa string
		h        http.Header
		path     string
	}{
		{"plain", "reader", nil, ns + "/secrets/s1?resourceVersion=0"},
		{"impersonated", "imp", http.Header{"Impersonate-User": {"boss"}}, ns + "/secrets/s1?resourceVersion=0"},
		{"selector", "kubelet", http.Header{"Impersonate-User": {"system:node:n1"}, "Impersonate-Group": {"system:nodes"}}, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&resourceVersion=0"},
	}
	warm := startAuthz(b, nil)
	cold := startAuthz(b, func(o *daemon.Options) {
		o.AuthorizationCacheTTL, o.AuthorizationDeniedCacheTTL = time.Nanosecond, time.Nanosecond
	})
	quiet := startAuthz(b, func(o *daemon.Options) { o.Audit.PolicyFile, o.Audit.LogPath = "", "" })
	for _, r := range reads {
		for _, c := range []struct {
			name string
			f    *authzFixture
		}{{"warm", warm}, {"cold", cold}} {
			b.Run(fmt.Sprintf("review=%s/read=%s", c.name, r.name), func(b *testing.B) {
				c.f.readLoop(b, r.sa, r.h, r.path)
			})
		}
	}
	for _, c := range []struct {
		name string
		f    *authzFixture
	}{{"on", warm}, {"off", quiet}} {
		b.Run("audit="+c.name+"/read=plain", func(b *testing.B) {
			c.f.readLoop(b, "reader", nil, ns+"/secrets/s1?resourceVersion=0")
		})
	}
}

// readLoop reads path as sa with headers h b.N times, after one read that
// must succeed.
func (f *authzFixture) readLoop(b *testing.B, sa string, h http.Header, path string) {
	base := f.d.KubeAPIURL()
	if r := ask(b, f.cachedHTTP, base, f.tokens[sa], h, path, false); r.Code != http.StatusOK {
		b.Fatalf("GET %s as %s %v: %+v", path, sa, h, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := ask(b, f.cachedHTTP, base, f.tokens[sa], h, path, false); r.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, r.Code)
		}
	}
}
