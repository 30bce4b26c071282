package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
)

// withCert is a call context whose TLS handshake verified a certificate
// with this common name and URI SANs.
func withCert(cn string, uris ...string) context.Context {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	for _, u := range uris {
		parsed, _ := url.Parse(u)
		cert.URIs = append(cert.URIs, parsed)
	}
	state := tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: state}})
}

func TestMTLS(t *testing.T) {
	m := auth.NewMTLS([]config.MTLSClient{
		{URI: "spiffe://cluster.local/ns/a/sa/reader", Resources: []string{"configmaps"}, Namespaces: []string{"a"}},
		{CommonName: "ops", Resources: []string{config.All}, Namespaces: []string{config.All}},
	})
	cms := func(verb, ns string) auth.Attributes {
		return auth.Attributes{Verb: verb, Resource: "configmaps", Configured: "configmaps", Namespace: ns}
	}
	tests := []struct {
		name     string
		ctx      context.Context
		a        auth.Attributes
		wantKind *auth.Kind // nil: allowed
	}{
		{"URI SAN, its namespace", withCert("ignored", "spiffe://cluster.local/ns/a/sa/reader"), cms("list", "a"), nil},
		{"URI SAN, another namespace", withCert("x", "spiffe://cluster.local/ns/a/sa/reader"), cms("list", "b"), kind(auth.Forbidden)},
		{"URI SAN, all namespaces", withCert("x", "spiffe://cluster.local/ns/a/sa/reader"), cms("watch", ""), kind(auth.Forbidden)},
		{"URI SAN, another resource", withCert("x", "spiffe://cluster.local/ns/a/sa/reader"),
			auth.Attributes{Verb: "get", Resource: "secrets", Configured: "secrets", Namespace: "a"}, kind(auth.Forbidden)},
		{"common name with a wildcard rule", withCert("ops"), cms("watch", ""), nil},
		{"identity no rule names", withCert("stranger"), cms("list", "a"), kind(auth.Forbidden)},
		{"no client certificate", context.Background(), cms("list", "a"), kind(auth.Unauthenticated)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := m.Authenticate(tc.ctx)
			if err == nil {
				err = m.Authorize(tc.ctx, u, tc.a)
			}
			var ae *auth.Error
			switch {
			case tc.wantKind == nil && err != nil:
				t.Fatalf("got %v, want allowed", err)
			case tc.wantKind != nil && (!errors.As(err, &ae) || ae.Kind != *tc.wantKind):
				t.Fatalf("got %v, want kind %d", err, *tc.wantKind)
			}
		})
	}
}

func kind(k auth.Kind) *auth.Kind { return &k }
