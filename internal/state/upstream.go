package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// UpstreamIdentity returns the identity of the upstream informerd a leaf
// (--upstream-informerd) takes its objects from: its address — the
// replicas in any order, a headless Service's name or a Unix socket —
// as "informerd://<address>", and the SHA-256 of the CA bundle that
// verifies it (caFile, --upstream-ca-file; none for plaintext). A state a
// leaf saved from another upstream, or from one whose CA changed (a root
// tier rebuilt), is set aside; one from the same upstream whose history
// turned out to be another is found at the leaf's next list, as for an API
// server (ErrForeignState in internal/pipeline).
func UpstreamIdentity(addr, caFile string) (Identity, error) {
	var replicas []string
	for a := range strings.SplitSeq(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			replicas = append(replicas, a)
		}
	}
	slices.Sort(replicas)
	id := Identity{Server: "informerd://" + strings.Join(replicas, ",")}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return Identity{}, fmt.Errorf("read the upstream informerd's CA bundle: %w", err)
		}
		sum := sha256.Sum256(b)
		id.CA = hex.EncodeToString(sum[:])
	}
	return id, nil
}
