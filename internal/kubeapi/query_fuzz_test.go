package kubeapi

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/object"
)

// FuzzQuery feeds list and watch query strings to the parsing the handler
// does: a query the API server would refuse is refused with its 400 or 422
// Status, never a panic or a 500; one that is accepted selects exactly what
// apimachinery's own label and field selectors select after the API
// server's field label conversion (pods'), the indexed field and fields
// read from the JSON included, for objects with and without a value in
// that index.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{
		"", "labelSelector=app%3Dweb", "labelSelector=app+in+(a,b),!tier", "fieldSelector=metadata.name%3Dcm1",
		"fieldSelector=spec.nodeName%3Dn1,metadata.namespace%3Da", "fieldSelector=spec.nodeName!%3Dn1", "fieldSelector=spec.nodeName%3D",
		"fieldSelector=status.phase%3DRunning", "resourceVersion=12&resourceVersionMatch=Exact", "resourceVersionMatch=NotOlderThan",
		"resourceVersion=0&resourceVersionMatch=Exact", "limit=-1", "limit=abc", "continue=eyJydiI6IjEyIiwiayI6ImEvYiJ9",
		"continue=x&resourceVersion=3", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
		"sendInitialEvents=true", "timeoutSeconds=5&watch=true", "watch=maybe", "labelSelector=%ZZ",
	} {
		f.Add(q, false)
		f.Add(q, true)
	}
	names := []string{"namespace", "node"}
	indexFields := map[string]string{"spec.nodeName": "node"}
	objs := []*object.Object{
		(&object.Object{Key: "a/cm1", Namespace: "a", Name: "cm1", Labels: object.Labels{"app", "web"}, Values: [][]string{{"a"}, {"n1"}}}).
			WithJSON([]byte(`{"metadata":{"name":"cm1","namespace":"a"},"spec":{"nodeName":"n1","hostNetwork":true},"status":{"phase":"Running","podIPs":[{"ip":"10.0.0.1"}]}}`)),
		(&object.Object{Key: "b/cm2", Namespace: "b", Name: "cm2", Labels: object.Labels{"app", "db", "tier", "x"}, Values: [][]string{{"b"}, nil}}).
			WithJSON([]byte(`{"metadata":{"name":"cm2","namespace":"b"},"status":{"phase":"Pending"}}`)),
		(&object.Object{Key: "a/p", Namespace: "a", Name: "p", Values: [][]string{{"a"}, {""}}}).WithJSON([]byte(`{"metadata":{"name":"p","namespace":"a"}}`)),
	}
	pods := func() *fieldSet {
		return fieldsOf(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, true, nil, false)
	}
	f.Fuzz(func(t *testing.T, raw string, watch bool) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // net/http refuses it before a handler runs
		}
		opts, err := listOptions(q, watch)
		if err != nil {
			requireClientError(t, raw, err)
			return
		}
		if opts.Continue != "" {
			if _, err := decodeToken(opts.Continue); err != nil {
				requireClientError(t, raw, err)
			}
		}
		sel, err := newSelector(opts, "", pods, names, indexFields)
		if err != nil {
			requireClientError(t, raw, err)
			return
		}
		for _, o := range objs {
			node := ""
			if len(o.Values[1]) > 0 {
				node = o.Values[1][0]
			}
			// The API server's fields of the object, and its selector
			// after the field label conversion.
			set := fields.Set{fieldName: o.Name, fieldNamespace: o.Namespace, "spec.nodeName": node}
			for f := range pods().values {
				if _, ok := set[f]; !ok {
					data, _ := o.Bytes()
					set[f] = pods().value(f, data)
				}
			}
			fsel := opts.FieldSelector
			if fsel != nil {
				if fsel, err = fsel.Transform(func(f, v string) (string, string, error) { return pods().accept[f], v, nil }); err != nil {
					t.Fatal(err)
				}
			}
			want := (opts.LabelSelector == nil || opts.LabelSelector.Matches(labels.Set(labelMap(o.Labels)))) &&
				(fsel == nil || fsel.Matches(set))
			if got := sel.sel.Matches(o); got != want {
				t.Fatalf("query %q selects %s: %v, apimachinery's selectors say %v", raw, o.Key, got, want)
			}
		}
	})
}

func labelMap(l object.Labels) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(l); i += 2 {
		m[l[i]] = l[i+1]
	}
	return m
}

// requireClientError fails unless err is the API server's 400 or 422.
func requireClientError(t *testing.T, raw string, err error) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("query %q: %T %v, want a Status", raw, err, err)
	}
	if c := se.Status().Code; c != http.StatusBadRequest && c != http.StatusUnprocessableEntity {
		t.Fatalf("query %q: HTTP %d %v, want 400 or 422", raw, c, err)
	}
}
