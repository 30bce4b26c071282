package server

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// selObject is an object as the tests describe it; the cache's form is
// built from it, and the expected selection is computed from it alone.
type selObject struct {
	ns, name string
	labels   map[string]string
	node     string // "" for none
	images   []string
}

var selIndexes = []string{"namespace", "node", "image", "app"}

func (s selObject) values(index string) []string {
	switch index {
	case "namespace":
		return []string{s.ns}
	case "node":
		if s.node != "" {
			return []string{s.node}
		}
	case "image":
		return s.images
	case "app":
		if v, ok := s.labels["app"]; ok {
			return []string{v}
		}
	}
	return nil
}

// cached builds the object the encoder would: labels as sorted pairs, one
// sorted, duplicate free list of values per index.
func (s selObject) cached() *object.Object {
	o := &object.Object{Key: object.KeyOf(s.ns, s.name), Namespace: s.ns, Name: s.name}
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o.Labels = append(o.Labels, k, s.labels[k])
	}
	for _, ix := range selIndexes {
		vs := slices.Clone(s.values(ix))
		slices.Sort(vs)
		o.Values = append(o.Values, slices.Compact(vs))
	}
	return o
}

var selObjects = []selObject{
	{ns: "a", name: "p0", labels: map[string]string{"app": "web", "tier": "front"}, node: "n0", images: []string{"web:1"}},
	{ns: "a", name: "p1", labels: map[string]string{"app": "db"}, node: "n1", images: []string{"db:1", "sidecar:1"}},
	{ns: "a", name: "p2", images: []string{}},
	{ns: "b", name: "p0", labels: map[string]string{"app": "web", "version": "2"}, node: "n0", images: []string{"web:2", "web:2"}},
	{ns: "b", name: "q1", labels: map[string]string{"app": "", "example.com/role": "x"}, node: "n1", images: []string{"db:1"}},
	{name: "cluster", labels: map[string]string{"scope": "cluster"}},
}

// FuzzSelection parses selectors the way List and Watch do (selection): a
// bad label selector, an unknown index or an index without values is
// INVALID_ARGUMENT and nothing else is; an accepted selection names the
// requested index and values, and selects exactly the objects a reference
// built on labels.Set selects, for the fixed objects and for one with a
// fuzzed label. The parsed label selector's String() selects the same.
func FuzzSelection(f *testing.F) {
	for _, s := range []struct {
		ns, labels string
		hasIndex   bool
		index      string
		values     string
	}{
		{"", "", false, "", ""},
		{"a", "app=web", false, "", ""},
		{"", "app in (web,db),tier!=back", true, "node", "n0,n1"},
		{"", "!app", false, "", ""},
		{"", "app", true, "image", "db:1"},
		{"b", "version>1", true, "namespace", "b"},
		{"", "app=", true, "app", ""},
		{"", "example.com/role=x", true, "app", ","},
		{"", "a in (", false, "", ""},
		{"", "app notin (web)", true, "zone", "a"},
		{"", "app==web,app!=db", true, "node", "n0,,n0"},
		{"", "Upper=Case,x.y/z=-", true, "namespace", ""},
		{"", "", true, "", "x"},
	} {
		f.Add(s.ns, s.labels, s.hasIndex, s.index, s.values, "extra", "v")
	}
	ix := indexer.New(selIndexes, indexer.Options{})
	f.Fuzz(func(t *testing.T, ns, labelSelector string, hasIndex bool, indexName, values, extraKey, extraValue string) {
		sel := &pb.Selector{Namespace: ns, LabelSelector: labelSelector}
		if hasIndex {
			sel.Index = &pb.IndexSelector{Name: indexName}
			if values != "" {
				sel.Index.Values = strings.Split(values, ",")
			}
		}
		got, err := selection(ix, sel)

		parsed, lerr := labels.Parse(labelSelector)
		wantErr := lerr != nil || hasIndex && (!slices.Contains(selIndexes, indexName) || len(sel.Index.GetValues()) == 0)
		if err != nil {
			if st, ok := status.FromError(err); !ok || st.Code() != codes.InvalidArgument {
				t.Fatalf("selection(%v) error %v, want an INVALID_ARGUMENT status", sel, err)
			}
			if !wantErr {
				t.Fatalf("selection(%v) = %v, want it accepted", sel, err)
			}
			return
		}
		if wantErr {
			t.Fatalf("selection(%v) accepted; label parse error %v, indexes %v", sel, lerr, selIndexes)
		}
		wantIndex := -1
		if hasIndex {
			wantIndex = slices.Index(selIndexes, indexName)
		}
		if got.Namespace != ns || got.Index != wantIndex || !slices.Equal(got.Values, sel.Index.GetValues()) {
			t.Fatalf("selection(%v) = namespace %q index %d values %q", sel, got.Namespace, got.Index, got.Values)
		}
		objs := slices.Clone(selObjects)
		objs = append(objs, selObject{ns: "a", name: "fuzzed", labels: map[string]string{extraKey: extraValue, "app": extraValue}, node: extraValue, images: []string{extraValue, "web:1"}})
		again, err := labels.Parse(parsed.String())
		if err != nil {
			t.Fatalf("label selector %q parses, but its String() %q does not: %v", labelSelector, parsed.String(), err)
		}
		for _, o := range objs {
			want := (ns == "" || o.ns == ns) && parsed.Matches(labels.Set(o.labels))
			if hasIndex {
				want = want && slices.ContainsFunc(o.values(indexName), func(v string) bool { return slices.Contains(sel.Index.GetValues(), v) })
			}
			if m := got.Matches(o.cached()); m != want {
				t.Errorf("selection %v matches %s/%s (labels %v) = %v, want %v", sel, o.ns, o.name, o.labels, m, want)
			}
			if a, b := again.Matches(labels.Set(o.labels)), parsed.Matches(labels.Set(o.labels)); a != b {
				t.Errorf("label selector %q matches labels %v = %v, its String() %q = %v", labelSelector, o.labels, b, parsed.String(), a)
			}
		}
	})
}

// FuzzContinueToken decodes arbitrary continue tokens: anything not issued
// by this server is INVALID_ARGUMENT, an accepted one has a resourceVersion
// and re-encodes to a token that decodes the same; and every token the
// server issues decodes back to what it encodes.
func FuzzContinueToken(f *testing.F) {
	f.Add(indexer.Continue{RV: "25", LastKey: "a/p1"}.Encode(), "25", "a/p1")
	f.Add(indexer.Continue{RV: "1", LastKey: ""}.Encode(), "18446744073709551615", "cluster-scoped")
	f.Add(indexer.Continue{LastKey: "a/p1"}.Encode(), "", "a/p1")
	f.Add("eyJydiI6IjI1IiwiayI6ImEvcDEifQ==", "x", "")
	f.Add("eyJydiI6IjI1IiwiayI6ImEvcDEifQ\n", "0", "a/")
	f.Add("e30", "25", "\x00")
	f.Add("garbage", "25", "a/p1")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, token, rv, lastKey string) {
		ct, err := decodeToken(token)
		if err != nil {
			if st, ok := status.FromError(err); !ok || st.Code() != codes.InvalidArgument {
				t.Fatalf("decodeToken(%q) error %v, want an INVALID_ARGUMENT status", token, err)
			}
		} else {
			if ct.RV == "" {
				t.Fatalf("decodeToken(%q) = %+v: accepted without a resourceVersion", token, ct)
			}
			back, err := decodeToken(ct.Encode())
			if err != nil || back != ct {
				t.Fatalf("decodeToken(%q) = %+v, re-encoded it decodes to %+v, %v", token, ct, back, err)
			}
		}
		if rv == "" || !utf8.ValidString(rv) || !utf8.ValidString(lastKey) {
			return // never issued: the RV and keys come from the API server
		}
		want := indexer.Continue{RV: rv, LastKey: lastKey}
		tok := want.Encode()
		if got, err := decodeToken(tok); err != nil || got != want {
			t.Fatalf("issued token %q for %+v decodes to %+v, %v", tok, want, got, err)
		}
		if diff := cmp.Diff(tok, want.Encode()); diff != "" {
			t.Fatalf("Encode is not deterministic:\n%s", diff)
		}
	})
}
