package auth_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
)

const (
	nodeNameKey = "authentication.kubernetes.io/node-name"
	nodeUIDKey  = "authentication.kubernetes.io/node-uid"
)

// nodeResources are a root's resources: pods and ResourceSlices with a
// node index, configmaps with none.
var nodeResources = []config.Resource{
	{Resource: "pods", Indexes: []config.Index{{Name: "app", Label: "app"}, {Name: "node", JSONPath: "{.spec.nodeName}"}}},
	{Resource: "resourceslices.resource.k8s.io", Indexes: []config.Index{{Name: "node", JSONPath: "{.spec.nodeName}"}}},
	{Resource: "configmaps"},
}

func leafUser(extra map[string][]string) user.Info {
	return &user.DefaultInfo{Name: "system:serviceaccount:informerd:leaf", Extra: extra}
}

var onN1 = map[string][]string{nodeNameKey: {"n1"}, nodeUIDKey: {"uid-1"}}

// TestNodeBinding: a bound ServiceAccount lists and watches its node's
// objects of node-scoped resources, by the node index or the field
// selector, and nothing wider; without a node it reads nothing; others
// and other resources pass to the authorizer unchanged.
func TestNodeBinding(t *testing.T) {
	n := auth.NewNodeBinding([]auth.ServiceAccount{{Namespace: "informerd", Name: "leaf"}}, nodeResources)
	pods := auth.Attributes{Verb: "list", Version: "v1", Resource: "pods", Configured: "pods"}
	with := func(f func(a *auth.Attributes)) auth.Attributes {
		a := pods
		f(&a)
		return a
	}
	byIndex := func(verb string, values ...string) auth.Attributes {
		return with(func(a *auth.Attributes) { a.Verb, a.Index, a.IndexValues = verb, "node", values })
	}
	n1 := mustFields(t, "spec.nodeName=n1")
	tests := []struct {
		name string
		u    user.Info
		a    auth.Attributes
		// want is the attributes passed on when allowed; deny a part of
		// the reason when refused.
		want *auth.Attributes
		deny string
	}{
		{name: "list by its node's index", u: leafUser(onN1), a: byIndex("list", "n1"),
			want: new(with(func(a *auth.Attributes) { a.Index, a.IndexValues, a.FieldSelector = "node", []string{"n1"}, n1 }))},
		{name: "watch by its node's index in a namespace", u: leafUser(onN1), a: with(func(a *auth.Attributes) {
			a.Verb, a.Namespace, a.Index, a.IndexValues = "watch", "ns", "node", []string{"n1", "n1"}
		}), want: new(with(func(a *auth.Attributes) {
			a.Verb, a.Namespace, a.Index, a.IndexValues, a.FieldSelector = "watch", "ns", "node", []string{"n1", "n1"}, n1
		}))},
		{name: "list by field selector", u: leafUser(onN1), a: with(func(a *auth.Attributes) { a.FieldSelector = mustFields(t, "spec.nodeName==n1,status.phase=Running") }),
			want: new(with(func(a *auth.Attributes) { a.FieldSelector = mustFields(t, "spec.nodeName==n1,status.phase=Running") }))},
		{name: "watch ResourceSlices by its node", u: leafUser(onN1), a: auth.Attributes{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices", Configured: "resourceslices.resource.k8s.io", Index: "node", IndexValues: []string{"n1"}},
			want: &auth.Attributes{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices", Configured: "resourceslices.resource.k8s.io", Index: "node", IndexValues: []string{"n1"}, FieldSelector: n1}},
		{name: "list every pod", u: leafUser(onN1), a: pods, deny: `may only list and watch the pods of that node, selected by index "node" with the one value "n1", or by field selector spec.nodeName=n1`},
		{name: "list another node's pods", u: leafUser(onN1), a: byIndex("list", "n2"), deny: `bound to node "n1"`},
		{name: "watch its node's and another's", u: leafUser(onN1), a: byIndex("watch", "n1", "n2"), deny: `bound to node "n1"`},
		{name: "list by an index without values", u: leafUser(onN1), a: byIndex("list"), deny: `bound to node "n1"`},
		{name: "list by another index", u: leafUser(onN1), a: with(func(a *auth.Attributes) { a.Index, a.IndexValues = "app", []string{"n1"} }), deny: `bound to node "n1"`},
		{name: "field selector of another node", u: leafUser(onN1), a: with(func(a *auth.Attributes) { a.FieldSelector = mustFields(t, "spec.nodeName=n2") }), deny: `bound to node "n1"`},
		{name: "field selector not equal", u: leafUser(onN1), a: with(func(a *auth.Attributes) { a.FieldSelector = mustFields(t, "spec.nodeName!=n2") }), deny: `bound to node "n1"`},
		{name: "get a pod", u: leafUser(onN1), a: with(func(a *auth.Attributes) { a.Verb, a.Namespace, a.Name = "get", "ns", "p" }), deny: "may only list and watch"},
		{name: "configmaps: not node-scoped, passed on", u: leafUser(onN1), a: auth.Attributes{Verb: "list", Resource: "configmaps", Configured: "configmaps"},
			want: &auth.Attributes{Verb: "list", Resource: "configmaps", Configured: "configmaps"}},
		{name: "pods configured without a node index", u: leafUser(onN1), a: auth.Attributes{Verb: "list", Resource: "pods", Configured: "pods.v1.", Index: "node", IndexValues: []string{"n1"}},
			deny: "has no index with JSONPath {.spec.nodeName}"},
		{name: "no node in the token", u: leafUser(map[string][]string{"authentication.kubernetes.io/pod-name": {"p"}}), a: byIndex("list", "n1"), deny: "its token names no node"},
		{name: "no node, configmaps", u: leafUser(nil), a: auth.Attributes{Verb: "list", Resource: "configmaps", Configured: "configmaps"}, deny: "its token names no node"},
		{name: "a node name without its uid", u: leafUser(map[string][]string{nodeNameKey: {"n1"}}), a: byIndex("list", "n1"), deny: "its token names no node"},
		{name: "two node names", u: leafUser(map[string][]string{nodeNameKey: {"n1", "n2"}, nodeUIDKey: {"uid-1"}}), a: byIndex("list", "n1"), deny: "its token names no node"},
		{name: "another ServiceAccount", u: &user.DefaultInfo{Name: "system:serviceaccount:informerd:other"}, a: pods, want: &pods},
		{name: "the same name in another namespace", u: &user.DefaultInfo{Name: "system:serviceaccount:other:leaf"}, a: pods, want: &pods},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := n.Restrict(tc.u, tc.a)
			if tc.deny != "" {
				var e *auth.Error
				if !errors.As(err, &e) || e.Kind != auth.Forbidden || !strings.Contains(e.Reason, tc.deny) {
					t.Fatalf("got %v, want Forbidden with a reason containing %q", err, tc.deny)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tc.want, got, cmp.Comparer(func(a, b fields.Requirement) bool { return a == b })); diff != "" {
				t.Errorf("attributes passed on (-want +got):\n%s", diff)
			}
		})
	}

	var none *auth.NodeBinding
	if got, err := none.Restrict(leafUser(nil), pods); err != nil || got.Verb != "list" {
		t.Errorf("the nil NodeBinding: %v, %v; want the attributes unchanged", got, err)
	}
}

// TestNodeBindingReview: the SubjectAccessReview still decides a bound
// caller's allowed read, and is asked with the field selector of its node
// (what the API server would be asked for the same read), not an index
// it does not know; a read the binding refuses is never reviewed.
func TestNodeBindingReview(t *testing.T) {
	rv := &reviewer{}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	nodes := auth.NewNodeBinding([]auth.ServiceAccount{{Namespace: "informerd", Name: "leaf"}}, nodeResources)
	k, err := auth.NewKubernetes(&rest.Config{Host: srv.URL}, auth.KubernetesOptions{NodeBinding: nodes})
	if err != nil {
		t.Fatal(err)
	}
	read := auth.Attributes{Verb: "watch", Version: "v1", Resource: "pods", Configured: "pods", Index: "node", IndexValues: []string{"n1"}}
	if err := k.Authorize(t.Context(), leafUser(onN1), read); err == nil {
		t.Fatal("allowed while the reviewer allows nothing: the binding granted what the review did not")
	}
	if rv.reviews() != 1 {
		t.Fatalf("%d reviews, want 1", rv.reviews())
	}
	spec := rv.seen[0]
	ra := spec.ResourceAttributes
	if ra == nil || ra.FieldSelector == nil || len(ra.FieldSelector.Requirements) != 1 ||
		ra.FieldSelector.Requirements[0].Key != "spec.nodeName" || !cmp.Equal(ra.FieldSelector.Requirements[0].Values, []string{"n1"}) {
		t.Fatalf("review asked %+v; want the field selector spec.nodeName=n1", ra)
	}
	rv.allowOnly(spec)
	k, err = auth.NewKubernetes(&rest.Config{Host: srv.URL}, auth.KubernetesOptions{NodeBinding: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Authorize(t.Context(), leafUser(onN1), read); err != nil {
		t.Fatalf("its node's pods, reviewed and allowed: %v", err)
	}
	before := rv.reviews()
	wider := read
	wider.Index, wider.IndexValues = "", nil
	if err := k.Authorize(t.Context(), leafUser(onN1), wider); err == nil {
		t.Error("every pod: allowed")
	}
	if rv.reviews() != before {
		t.Error("a read the binding refuses was reviewed")
	}
}

func TestParseServiceAccounts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []auth.ServiceAccount
		err  bool
	}{
		{name: "empty", in: ""},
		{name: "one", in: "informerd:informerd-leaf", want: []auth.ServiceAccount{{Namespace: "informerd", Name: "informerd-leaf"}}},
		{name: "two with spaces", in: " a:b , c:d.e ,", want: []auth.ServiceAccount{{Namespace: "a", Name: "b"}, {Namespace: "c", Name: "d.e"}}},
		{name: "no namespace", in: "leaf", err: true},
		{name: "a username", in: "system:serviceaccount:a:b", err: true},
		{name: "upper case", in: "A:b", err: true},
		{name: "empty name", in: "a:", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.ParseServiceAccounts(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseServiceAccounts(f *testing.F) {
	for _, s := range []string{"", "a:b", "a:b,c:d", "system:serviceaccount:a:b", ":", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sas, err := auth.ParseServiceAccounts(s)
		if err != nil {
			return
		}
		for _, sa := range sas {
			again, err := auth.ParseServiceAccounts(sa.String())
			if err != nil || len(again) != 1 || again[0] != sa {
				t.Fatalf("%q parsed to %v, which does not parse back: %v %v", s, sa, again, err)
			}
		}
	})
}
