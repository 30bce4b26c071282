package pipeline

import (
	"encoding/json"
	"slices"

	"github.com/informerd/informerd/internal/config"
)

// upstreamPart is r's upstreamSelector as the durable state records it
// (state.Source.Upstream): the part of an upstream informerd's objects a
// leaf's cache holds, so that a state saved for another part — another
// node's pods — is set aside rather than restored. The index's values are
// a set: their order does not count. "" without an upstreamSelector.
func upstreamPart(r config.Resource) string {
	u := r.UpstreamSelector
	if u == nil {
		return ""
	}
	c := *u
	if u.Index != nil {
		ix := *u.Index
		ix.Values = slices.Sorted(slices.Values(ix.Values))
		c.Index = &ix
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Strings and a slice of strings always marshal.
		panic(err)
	}
	return string(b)
}
