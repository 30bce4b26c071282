package state

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUpstreamIdentity(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("a CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(other, []byte("another CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := func(addr, caFile string) Identity {
		t.Helper()
		got, err := UpstreamIdentity(addr, caFile)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := id("a:50051,b:50051", ca)
	if want := "informerd://a:50051,b:50051"; base.Server != want || base.CA == "" {
		t.Errorf("identity %+v, want server %s and a CA", base, want)
	}
	tests := []struct {
		name, addr, ca string
		same           bool
	}{
		{name: "the replicas in another order, with spaces", addr: " b:50051, a:50051", ca: ca, same: true},
		{name: "another replica", addr: "a:50051,c:50051", ca: ca},
		{name: "another CA", addr: "a:50051,b:50051", ca: other},
		{name: "plaintext", addr: "a:50051,b:50051"},
		{name: "an API server's URL is never a leaf's", addr: "https://a:50051", ca: ca},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := id(tc.addr, tc.ca); (got == base) != tc.same {
				t.Errorf("%+v against %+v: same = %v, want %v", got, base, got == base, tc.same)
			}
		})
	}
	if _, err := UpstreamIdentity("a:1", filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("a missing CA file gave no error")
	}
}
