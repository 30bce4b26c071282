package auth

import (
	"context"
	"crypto/x509"
	"slices"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/informerd/informerd/internal/config"
)

// MTLS identifies callers by their verified client certificate and
// authorizes them by the config file's mtlsClients rules. The TLS handshake
// (with --tls-client-ca-file) has already verified the certificate.
type MTLS struct {
	rules map[string]config.MTLSClient // by identity: "uri:..." or "cn:..."
}

var (
	_ Authenticator = (*MTLS)(nil)
	_ Authorizer    = (*MTLS)(nil)
)

// NewMTLS returns the mtls mode over the config's rules.
func NewMTLS(clients []config.MTLSClient) *MTLS {
	m := &MTLS{rules: map[string]config.MTLSClient{}}
	for _, c := range clients {
		if c.URI != "" {
			m.rules["uri:"+c.URI] = c
		} else {
			m.rules["cn:"+c.CommonName] = c
		}
	}
	return m
}

// Authenticate implements Authenticator. The identity is the first of the
// certificate's URI SANs, then its common name, that a rule names; a
// certificate no rule names is still authenticated (as its first identity)
// and is refused by Authorize, so the message can say which name to add.
func (m *MTLS) Authenticate(ctx context.Context) (user.Info, error) {
	cert, err := peerCertificate(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, u := range cert.URIs {
		ids = append(ids, "uri:"+u.String())
	}
	if cert.Subject.CommonName != "" {
		ids = append(ids, "cn:"+cert.Subject.CommonName)
	}
	if len(ids) == 0 {
		return nil, unauthenticated("the client certificate has neither a URI SAN nor a subject common name to identify it by")
	}
	for _, id := range ids {
		if _, ok := m.rules[id]; ok {
			return &user.DefaultInfo{Name: id}, nil
		}
	}
	return &user.DefaultInfo{Name: ids[0]}, nil
}

// Authorize implements Authorizer.
func (m *MTLS) Authorize(_ context.Context, u user.Info, a Attributes) error {
	rule, ok := m.rules[u.GetName()]
	if !ok {
		return forbidden(u, a, "no mtlsClients entry in the config names this certificate identity")
	}
	if !slices.Contains(rule.Resources, config.All) && !slices.Contains(rule.Resources, a.Configured) {
		return forbidden(u, a, "its mtlsClients entry does not list resource "+a.Configured)
	}
	if slices.Contains(rule.Namespaces, config.All) {
		return nil
	}
	if a.Namespace == "" {
		return forbidden(u, a, `reading across all namespaces needs namespaces: ["*"] in its mtlsClients entry; ask for one namespace instead`)
	}
	if !slices.Contains(rule.Namespaces, a.Namespace) {
		return forbidden(u, a, "its mtlsClients entry does not list namespace "+a.Namespace)
	}
	return nil
}

func peerCertificate(ctx context.Context) (*x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, unauthenticated("no peer information on the call")
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.VerifiedChains[0]) == 0 {
		return nil, unauthenticated("no verified client certificate: connect with TLS and a certificate signed by the CA of --tls-client-ca-file")
	}
	return tlsInfo.State.VerifiedChains[0][0], nil
}
