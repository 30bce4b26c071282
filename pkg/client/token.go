package client

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// tokenFile sends the bearer token in a file with every call. The file is
// stat'ed on each call and read again when its modification time or size
// changed: the kubelet replaces a projected token (an atomic symlink swap)
// well before it expires, and the next call carries the new one. Its
// methods may be called concurrently.
type tokenFile struct {
	path string
	// secure: the connection uses TLS, so grpc must refuse to send the
	// token over anything else.
	secure bool

	mu    sync.Mutex
	token string
	// file is what the token was read from: same file (inode), same
	// modification time and size means the same token.
	file os.FileInfo
}

var _ credentials.PerRPCCredentials = (*tokenFile)(nil)

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t *tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := t.read()
	if err != nil {
		// UNAUTHENTICATED rather than grpc's default UNAVAILABLE: retrying
		// does not help until the file is there.
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t *tokenFile) RequireTransportSecurity() bool { return t.secure }

func (t *tokenFile) read() (string, error) {
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("informerd client: bearer token file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file != nil && os.SameFile(t.file, fi) && fi.ModTime().Equal(t.file.ModTime()) && fi.Size() == t.file.Size() {
		return t.token, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("informerd client: bearer token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("informerd client: bearer token file %s is empty", t.path)
	}
	t.token, t.file = tok, fi
	return tok, nil
}
