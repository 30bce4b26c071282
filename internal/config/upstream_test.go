package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUpstreamSelector(t *testing.T) {
	t.Setenv("NODE_NAME", "node-7")
	c, err := Parse([]byte(`
resources:
  - resource: pods
    upstreamSelector:
      namespace: team-a
      labelSelector: "app=web"
      index: {name: node, values: ["${NODE_NAME}", "spare"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &UpstreamSelector{Namespace: "team-a", LabelSelector: "app=web", Index: &IndexSelector{Name: "node", Values: []string{"node-7", "spare"}}}
	if diff := cmp.Diff(want, c.Resources[0].UpstreamSelector); diff != "" {
		t.Errorf("upstreamSelector (-want +got):\n%s", diff)
	}
}

func TestUpstreamSelectorInvalid(t *testing.T) {
	t.Setenv("EMPTY", "")
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"an unset variable", `index: {name: node, values: ["${INFORMERD_TEST_UNSET}"]}`, "INFORMERD_TEST_UNSET, which is not set in the environment"},
		{"a variable set empty", `index: {name: node, values: ["${EMPTY}"]}`, "is empty"},
		{"no index name", `index: {values: [a]}`, "upstreamSelector.index.name: Required"},
		{"no values", `index: {name: node}`, "upstreamSelector.index.values: Required"},
		{"a bad label selector", `labelSelector: "a in ("`, "upstreamSelector.labelSelector"},
		{"a bad namespace", `namespace: "Team_A"`, "upstreamSelector.namespace"},
		{"an unknown field", `nodes: [a]`, "unknown field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("resources:\n  - resource: pods\n    upstreamSelector:\n      " + tt.yaml + "\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
