package config

import (
	"strings"
	"testing"
)

func TestMTLSClients(t *testing.T) {
	const head = "resources:\n  - resource: configmaps\n  - resource: pods\nmtlsClients:\n"
	tests := []struct {
		name, yaml string
		wantErrs   []string // each must appear; none means valid
	}{
		{name: "uri and common name", yaml: `
  - {uri: "spiffe://cluster.local/ns/a/sa/reader", resources: [configmaps], namespaces: [a]}
  - {commonName: ops, resources: ["*"], namespaces: ["*"]}`},
		{name: "neither identity", yaml: `
  - {resources: [pods], namespaces: [a]}`, wantErrs: []string{"mtlsClients[0]: Required value"}},
		{name: "both identities", yaml: `
  - {uri: "spiffe://x/y", commonName: ops, resources: [pods], namespaces: [a]}`, wantErrs: []string{"set only one of uri and commonName"}},
		{name: "relative uri", yaml: `
  - {uri: "reader", resources: [pods], namespaces: [a]}`, wantErrs: []string{"must be an absolute URI"}},
		{name: "resource not configured", yaml: `
  - {commonName: a, resources: [secrets], namespaces: [a]}`, wantErrs: []string{`mtlsClients[0].resources[0]: Unsupported value: "secrets"`}},
		{name: "no resources or namespaces", yaml: `
  - {commonName: a}`, wantErrs: []string{"mtlsClients[0].resources: Required value", "mtlsClients[0].namespaces: Required value"}},
		{name: "bad namespace", yaml: `
  - {commonName: a, resources: [pods], namespaces: [Not_A_Namespace]}`, wantErrs: []string{"mtlsClients[0].namespaces[0]: Invalid value"}},
		{name: "same identity twice", yaml: `
  - {commonName: a, resources: [pods], namespaces: [a]}
  - {commonName: a, resources: [configmaps], namespaces: [a]}`, wantErrs: []string{"mtlsClients[1]: Duplicate value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head + strings.TrimPrefix(tc.yaml, "\n")))
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want errors %q", tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
