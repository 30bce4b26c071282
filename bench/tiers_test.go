package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/informerd/informerd/internal/config"
)

// TestLeafConfig: the leaves' one configuration takes, in each leaf, the
// part of its own node, from NODE_NAME.
func TestLeafConfig(t *testing.T) {
	t.Setenv("NODE_NAME", nodeName(7, 20))
	c, err := config.Parse([]byte(leafConfig("tiers")))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.UpstreamSelector{Namespace: "tiers", Index: &config.IndexSelector{Name: "node", Values: []string{"node-007"}}}
	if diff := cmp.Diff(want, c.Resources[0].UpstreamSelector); diff != "" {
		t.Errorf("upstreamSelector (-want +got):\n%s", diff)
	}
}
