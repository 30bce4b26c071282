package kubeproto_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/informerd/informerd/internal/kubeproto"
)

// TestTranscoderMutations replaces each value of every fixture, one at a
// time, by values the API server never writes but a decoder must still
// treat as encoding/json does (null, -0, 1.0, 1e2, out of range, the
// wrong type, empty containers, another subtree), and compares the
// transcoder with the typed path: where it does not give up, the same
// bytes, or an error where the typed path errs.
func TestTranscoderMutations(t *testing.T) {
	replacements := []any{nil, json.RawMessage(`-0`), 1.0, json.RawMessage(`1e2`), json.RawMessage(`2147483648`),
		"", "YQ", "2026-01-02T03:04:05+01:00", []any{}, map[string]any{}, []any{nil}, true}
	var compared, gaveUp int
	for _, obj := range fixtures() {
		gvk := gvkOf(obj)
		var doc any
		if err := json.Unmarshal(encodeJSON(t, obj), &doc); err != nil {
			t.Fatal(err)
		}
		var subtrees []any // as JSON, so that none contains the value it replaces
		walk(doc, func(v any, _ func(any)) {
			if b, err := json.Marshal(v); err == nil {
				subtrees = append(subtrees, json.RawMessage(b))
			}
		})
		walk(doc, func(orig any, set func(any)) {
			for _, r := range append(replacements, subtrees[len(subtrees)/2], subtrees[len(subtrees)/3]) {
				set(r)
				js, err := json.Marshal(doc)
				set(orig)
				if err != nil {
					t.Fatal(err)
				}
				want, wantErr := kubeproto.MessageAPIServer(gvk, js)
				got, err := kubeproto.Transcode(gvk, js)
				if errors.Is(err, kubeproto.ErrTranscode) {
					gaveUp++
					continue
				}
				compared++
				requireSame(t, "transcoded "+gvk.Kind, js, got, want, err, wantErr)
			}
		})
	}
	t.Logf("%d mutations compared, %d given up on", compared, gaveUp)
	if compared < 1000 {
		t.Fatalf("only %d mutations compared", compared)
	}
}

// walk calls fn with every value inside v (not v itself) and a function
// that replaces it.
func walk(v any, fn func(v any, set func(any))) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			fn(e, func(n any) { v[k] = n })
			walk(e, fn)
		}
	case []any:
		for i, e := range v {
			fn(e, func(n any) { v[i] = n })
			walk(e, fn)
		}
	}
}
