package pipeline

import (
	"testing"

	"github.com/informerd/informerd/internal/config"
)

// TestUpstreamPart: a leaf's state records the part it takes, so that a
// state saved for another part is another cache; the order of an index's
// values does not make another part.
func TestUpstreamPart(t *testing.T) {
	part := func(u *config.UpstreamSelector) string {
		return upstreamPart(config.Resource{Resource: "pods", UpstreamSelector: u})
	}
	base := part(&config.UpstreamSelector{Index: &config.IndexSelector{Name: "node", Values: []string{"a", "b"}}})
	tests := []struct {
		name string
		u    *config.UpstreamSelector
		same bool
	}{
		{name: "the values in another order", u: &config.UpstreamSelector{Index: &config.IndexSelector{Name: "node", Values: []string{"b", "a"}}}, same: true},
		{name: "another node", u: &config.UpstreamSelector{Index: &config.IndexSelector{Name: "node", Values: []string{"a", "c"}}}},
		{name: "another index", u: &config.UpstreamSelector{Index: &config.IndexSelector{Name: "zone", Values: []string{"a", "b"}}}},
		{name: "a label selector too", u: &config.UpstreamSelector{LabelSelector: "app=web", Index: &config.IndexSelector{Name: "node", Values: []string{"a", "b"}}}},
		{name: "a namespace too", u: &config.UpstreamSelector{Namespace: "x", Index: &config.IndexSelector{Name: "node", Values: []string{"a", "b"}}}},
		{name: "no upstreamSelector", u: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := part(tc.u); (got == base) != tc.same {
				t.Errorf("%q against %q: same = %v, want %v", got, base, got == base, tc.same)
			}
		})
	}
	if got := part(nil); got != "" {
		t.Errorf("without an upstreamSelector: %q, want empty (an API server's resource, as states written before the field)", got)
	}
	values := []string{"b", "a"}
	part(&config.UpstreamSelector{Index: &config.IndexSelector{Name: "node", Values: values}})
	if values[0] != "b" {
		t.Error("upstreamPart sorted the configuration's values in place")
	}
}
