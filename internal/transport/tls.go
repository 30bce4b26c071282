// Package transport opens informerd's listeners: TCP with or without TLS
// (certificates reloaded when their files change), mutual TLS, and Unix
// sockets with a chosen mode and owner.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// TLSFiles name the PEM files of a TLS listener.
type TLSFiles struct {
	// CertFile and KeyFile are the serving certificate (chain) and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the listener require client
	// certificates signed by one of its CAs (mutual TLS).
	ClientCAFile string
}

// Enabled reports whether any file is set.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.ClientCAFile != "" }

// TLS serves certificates from files and reloads them when they change
// (watched with fsnotify and re-read every minute, as the API server does
// for its own), so a rotated certificate is served to new connections
// without a restart. Its methods are safe for concurrent use.
type TLS struct {
	serving  *dynamiccertificates.DynamicCertKeyPairContent
	clientCA *dynamiccertificates.DynamicFileCAContent

	mu      sync.Mutex
	certPEM []byte
	keyPEM  []byte
	cert    *tls.Certificate
}

// NewTLS loads the files once, so a bad file fails at start with its name.
func NewTLS(purpose string, f TLSFiles) (*TLS, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("%s: TLS needs both a certificate and a key file", purpose)
	}
	t := &TLS{}
	var err error
	if t.serving, err = dynamiccertificates.NewDynamicServingContentFromFiles(purpose, f.CertFile, f.KeyFile); err != nil {
		return nil, fmt.Errorf("%s: load certificate %s and key %s: %w", purpose, f.CertFile, f.KeyFile, err)
	}
	if _, err := t.certificate(); err != nil {
		return nil, fmt.Errorf("%s: %w", purpose, err)
	}
	if f.ClientCAFile != "" {
		if t.clientCA, err = dynamiccertificates.NewDynamicCAContentFromFile(purpose+"-client-ca", f.ClientCAFile); err != nil {
			return nil, fmt.Errorf("%s: load client CA %s: %w", purpose, f.ClientCAFile, err)
		}
	}
	return t, nil
}

// Run watches the files until ctx ends.
func (t *TLS) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { t.serving.Run(ctx, 1) })
	if t.clientCA != nil {
		wg.Go(func() { t.clientCA.Run(ctx, 1) })
	}
	wg.Wait()
	return nil
}

// Config returns the server configuration: TLS 1.2 or later, the current
// certificate at each handshake, and with a client CA, verified client
// certificates against the current CA bundle.
func (t *TLS) Config() *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.certificate() },
	}
	if t.clientCA == nil {
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		opts, ok := t.clientCA.VerifyOptions()
		if !ok {
			return nil, errors.New("no client CA loaded")
		}
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = opts.Roots
		return c, nil
	}
	return base
}

// certificate parses the current files' content when it changed.
func (t *TLS) certificate() (*tls.Certificate, error) {
	certPEM, keyPEM := t.serving.CurrentCertKeyContent()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cert != nil && bytes.Equal(certPEM, t.certPEM) && bytes.Equal(keyPEM, t.keyPEM) {
		return t.cert, nil
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse serving certificate and key: %w", err)
	}
	t.cert, t.certPEM, t.keyPEM = &c, certPEM, keyPEM
	return t.cert, nil
}
