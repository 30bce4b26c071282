package testenv

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditLogName is the audit log's file in the cert folder.
const auditLogName = "audit.log"

// AuditPolicy (kube-apiserver's, and informerd's in tests that compare
// the two logs) audits requests in AuditNamespace at level Metadata, once
// each (ResponseComplete; a watch also at ResponseStarted), and nothing
// else.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  namespaces: [` + AuditNamespace + `]
- level: None
`

// ReadAuditEvents parses the audit log at path, as kube-apiserver and
// informerd write it (--audit-log-format=json: one audit.k8s.io/v1 Event
// per line), in the order written. A missing file holds no events; a line
// that does not parse fails the test.
func ReadAuditEvents(t testing.TB, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	defer f.Close()
	var events []auditv1.Event
	s := bufio.NewScanner(f)
	s.Buffer(nil, 16<<20) // an event at level RequestResponse holds whole objects
	for line := 1; s.Scan(); line++ {
		var ev auditv1.Event
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatalf("audit log %s, line %d: %v", path, line, err)
		}
		events = append(events, ev)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("read audit log %s: %v", path, err)
	}
	return events
}
