package kubeproto_test

import (
	"encoding/json"
	"math/rand"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"

	"github.com/informerd/informerd/internal/kubeproto"
)

// TestDecodersAllKinds runs every built-in kind client-go knows, filled
// with random values as Kubernetes' own round-trip tests fill them, through
// both of Message's decoders: each must accept the object's JSON and make
// the same message of it. FuzzMessageDecoders goes deeper into a few kinds;
// this covers every kind's fields once.
func TestDecodersAllKinds(t *testing.T) {
	const perKind = 8
	fill := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), scheme.Codecs).NilChance(0.3).NumElements(0, 2).MaxDepth(8) // recursive schemas (a CRD's) end
	kinds := scheme.Scheme.AllKnownTypes()
	names := make([]schema.GroupVersionKind, 0, len(kinds))
	for gvk := range kinds {
		if kubeproto.Supports(gvk) {
			names = append(names, gvk)
		}
	}
	slices.SortFunc(names, func(a, b schema.GroupVersionKind) int {
		return compareStrings(a.String(), b.String())
	})
	if len(names) < 100 {
		t.Fatalf("only %d kinds with a protobuf encoding in client-go's scheme", len(names))
	}
	var checked, refused int
	for _, gvk := range names {
		for range perKind {
			js := randomJSON(t, fill, gvk)
			if _, err := kubeproto.MessageAPIServer(gvk, js); err != nil {
				// JSON encoding/json writes but the API server's decoder
				// refuses (random bytes in a value with its own JSON
				// form): nothing the API server sends.
				refused++
				continue
			}
			checked++
			requireSameMessage(t, gvk, js)
		}
	}
	t.Logf("%d kinds, %d objects each: %d compared, %d refused by the API server's decoder", len(names), perKind, checked, refused)
	if checked < refused {
		t.Fatalf("only %d of %d objects compared", checked, checked+refused)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// randomJSON returns the JSON encoding/json writes of a new object of gvk
// filled at random by fill.
func randomJSON(t *testing.T, fill *randfill.Filler, gvk schema.GroupVersionKind) []byte {
	t.Helper()
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	fill.Fill(obj)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	return js
}
