// Package selfcert gives a loopback listener TLS that manages itself: a CA
// of its own, kept in a private folder across restarts, published to a
// path clients trust (a sidecar's ca.crt in a volume shared with the app),
// and a serving certificate for 127.0.0.1, ::1 and localhost signed by it,
// issued at start and renewed before it expires. The files are written
// atomically (a temporary file, then a rename), so the listener's file
// watcher (internal/transport) serves the renewed certificate to new
// connections while open ones, and their watches, go on.
package selfcert

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultValidity   = 24 * time.Hour
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
)

// DefaultHosts are the names a loopback client dials.
var DefaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// Options configure an Issuer.
type Options struct {
	// Dir is a private folder for the CA's key and the serving
	// certificate and key (created 0700).
	Dir string
	// CAOut, when set, is where the CA certificate is published for
	// clients (created with its folder).
	CAOut string
	// Hosts are the serving certificate's IP and DNS names (default
	// DefaultHosts).
	Hosts []string
	// Validity is the serving certificate's lifetime (default
	// DefaultValidity); it is renewed after two thirds of it.
	Validity time.Duration
	// Clock is for tests; nil means the real clock.
	Clock clock.WithTicker
}

// Issuer issues and renews the serving certificate. Run renews it; the
// other methods are safe for concurrent use.
type Issuer struct {
	o      Options
	ca     *x509.Certificate
	caKey  crypto.Signer
	expiry time.Time
}

// New loads the CA from Dir, or creates it, publishes it to CAOut, and
// issues a serving certificate.
func New(o Options) (*Issuer, error) {
	if o.Dir == "" {
		return nil, errors.New("selfcert: a private folder is required")
	}
	if len(o.Hosts) == 0 {
		o.Hosts = DefaultHosts
	}
	if o.Validity <= 0 {
		o.Validity = DefaultValidity
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("selfcert: %w", err)
	}
	i := &Issuer{o: o}
	if err := i.loadOrCreateCA(); err != nil {
		return nil, err
	}
	if o.CAOut != "" {
		if err := os.MkdirAll(filepath.Dir(o.CAOut), 0o755); err != nil {
			return nil, fmt.Errorf("selfcert: %w", err)
		}
		if err := writeAtomic(o.CAOut, pemBlock("CERTIFICATE", i.ca.Raw), 0o644); err != nil {
			return nil, err
		}
	}
	if err := i.issue(); err != nil {
		return nil, err
	}
	return i, nil
}

// CertFile and KeyFile are the serving certificate's files.
func (i *Issuer) CertFile() string { return filepath.Join(i.o.Dir, "tls.crt") }

// KeyFile is the serving key's file.
func (i *Issuer) KeyFile() string { return filepath.Join(i.o.Dir, "tls.key") }

// CAFile is the CA certificate's file in the private folder.
func (i *Issuer) CAFile() string { return filepath.Join(i.o.Dir, "ca.crt") }

// Run renews the serving certificate after two thirds of its lifetime,
// until ctx ends. A failed renewal is retried a minute later; the old
// certificate is served meanwhile.
func (i *Issuer) Run(ctx context.Context) error {
	for {
		wait := i.expiry.Sub(i.o.Clock.Now()) - i.o.Validity/3
		t := i.o.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		if err := i.issue(); err != nil {
			r := i.o.Clock.NewTimer(time.Minute)
			select {
			case <-ctx.Done():
				r.Stop()
				return nil
			case <-r.C():
			}
		}
	}
}

func (i *Issuer) loadOrCreateCA() error {
	certPEM, err1 := os.ReadFile(i.CAFile())
	keyPEM, err2 := os.ReadFile(filepath.Join(i.o.Dir, "ca.key"))
	if err1 == nil && err2 == nil {
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb != nil && kb != nil {
			ca, err := x509.ParseCertificate(cb.Bytes)
			key, kerr := x509.ParseECPrivateKey(kb.Bytes)
			if err == nil && kerr == nil && i.o.Clock.Now().Before(ca.NotAfter.Add(-DefaultValidity)) {
				i.ca, i.caKey = ca, key
				return nil
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("selfcert: CA key: %w", err)
	}
	now := i.o.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "informerd loopback CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(DefaultCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("selfcert: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("selfcert: CA: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("selfcert: CA key: %w", err)
	}
	if err := writeAtomic(filepath.Join(i.o.Dir, "ca.key"), pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return err
	}
	if err := writeAtomic(i.CAFile(), pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return err
	}
	i.ca, i.caKey = ca, key
	return nil
}

// issue writes a new serving certificate and key, the key first, each
// replaced atomically.
func (i *Issuer) issue() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("selfcert: serving key: %w", err)
	}
	now := i.o.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: i.o.Hosts[0]},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(i.o.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range i.o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, key.Public(), i.caKey)
	if err != nil {
		return fmt.Errorf("selfcert: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("selfcert: serving key: %w", err)
	}
	// One write of both would be atomic for neither: the watcher reloads
	// when either changes, and a pair that does not match is refused and
	// retried, so the old pair is served until both are in place.
	if err := writeAtomic(i.KeyFile(), pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return err
	}
	if err := writeAtomic(i.CertFile(), append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", i.ca.Raw)...), 0o644); err != nil {
		return err
	}
	i.expiry = tmpl.NotAfter
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeAtomic writes data to a temporary file in path's folder, then
// renames it over path.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("selfcert: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("selfcert: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("selfcert: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("selfcert: write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("selfcert: %w", err)
	}
	return nil
}
