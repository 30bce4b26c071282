package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/auth"
)

// reviewer is a SubjectAccessReview endpoint that allows exactly one
// review spec and counts the reviews it is sent.
type reviewer struct {
	allow authorizationv1.SubjectAccessReviewSpec
	mu    sync.Mutex
	seen  []authorizationv1.SubjectAccessReviewSpec
}

func (rv *reviewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" || json.NewDecoder(r.Body).Decode(&sar) != nil {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	rv.mu.Lock()
	rv.seen = append(rv.seen, sar.Spec)
	sar.Status.Allowed = reflect.DeepEqual(sar.Spec, rv.allow)
	rv.mu.Unlock()
	if !sar.Status.Allowed {
		sar.Status.Reason = "not the one allowed review"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sar)
}

func (rv *reviewer) allowOnly(spec authorizationv1.SubjectAccessReviewSpec) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.allow = spec
}

func (rv *reviewer) reviews() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.seen)
}

// TestDecisionCacheKeys: a decision is reused only for the same whole
// user (name, uid, groups, extra) and the same whole request (verb,
// resource, namespace, name, selectors). An allowed read, asked again by
// anyone who differs in one of these, is reviewed again and refused.
func TestDecisionCacheKeys(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", UID: "u1", Groups: []string{"dev"}, Extra: map[string][]string{"scopes": {"read"}}}
	read := auth.Attributes{
		Verb: "list", Version: "v1", Resource: "pods", Namespace: "ns",
		FieldSelector: mustFields(t, "spec.nodeName=n1"), LabelSelector: mustLabels(t, "app=web"),
	}
	get := auth.Attributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: "ns", Name: "a"}

	rv := &reviewer{}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	k, err := auth.NewKubernetes(&rest.Config{Host: srv.URL}, auth.KubernetesOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Learn the exact spec informerd sends for alice's list, then allow
	// only that one.
	if err := k.Authorize(t.Context(), alice, read); err == nil {
		t.Fatal("allowed before the reviewer allows anything")
	}
	rv.allowOnly(rv.seen[0])
	k, err = auth.NewKubernetes(&rest.Config{Host: srv.URL}, auth.KubernetesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := k.Authorize(t.Context(), alice, read); err != nil {
			t.Fatalf("alice's list, time %d: %v", i+1, err)
		}
	}
	if got := rv.reviews(); got != 2 {
		t.Fatalf("%d reviews after two equal requests on a fresh cache, want the first one and one more (then cached)", got)
	}

	with := func(f func(u *user.DefaultInfo, a *auth.Attributes)) (user.Info, auth.Attributes) {
		u := *alice
		u.Groups = append([]string(nil), alice.Groups...)
		u.Extra = map[string][]string{"scopes": {"read"}}
		a := read
		f(&u, &a)
		return &u, a
	}
	differs := map[string]func(u *user.DefaultInfo, a *auth.Attributes){
		"another user":            func(u *user.DefaultInfo, _ *auth.Attributes) { u.Name = "bob" },
		"another uid":             func(u *user.DefaultInfo, _ *auth.Attributes) { u.UID = "u2" },
		"another group":           func(u *user.DefaultInfo, _ *auth.Attributes) { u.Groups = []string{"ops"} },
		"one group more":          func(u *user.DefaultInfo, _ *auth.Attributes) { u.Groups = append(u.Groups, "ops") },
		"other extra":             func(u *user.DefaultInfo, _ *auth.Attributes) { u.Extra["scopes"] = []string{"write"} },
		"no extra":                func(u *user.DefaultInfo, _ *auth.Attributes) { u.Extra = nil },
		"another verb":            func(_ *user.DefaultInfo, a *auth.Attributes) { a.Verb = "watch" },
		"another namespace":       func(_ *user.DefaultInfo, a *auth.Attributes) { a.Namespace = "other" },
		"all namespaces":          func(_ *user.DefaultInfo, a *auth.Attributes) { a.Namespace = "" },
		"another resource":        func(_ *user.DefaultInfo, a *auth.Attributes) { a.Resource = "secrets" },
		"a name":                  func(_ *user.DefaultInfo, a *auth.Attributes) { a.Name = "a" },
		"another field selector":  func(_ *user.DefaultInfo, a *auth.Attributes) { a.FieldSelector = mustFields(t, "spec.nodeName=n2") },
		"no field selector":       func(_ *user.DefaultInfo, a *auth.Attributes) { a.FieldSelector = nil },
		"another label selector":  func(_ *user.DefaultInfo, a *auth.Attributes) { a.LabelSelector = mustLabels(t, "app=db") },
		"no label selector":       func(_ *user.DefaultInfo, a *auth.Attributes) { a.LabelSelector = nil },
		"another version":         func(_ *user.DefaultInfo, a *auth.Attributes) { a.Version = "v2" },
		"a get of another object": func(_ *user.DefaultInfo, a *auth.Attributes) { *a = get },
	}
	for name, f := range differs {
		before := rv.reviews()
		u, a := with(f)
		if err := k.Authorize(t.Context(), u, a); err == nil {
			t.Errorf("%s: allowed by alice's cached decision", name)
		}
		if got := rv.reviews() - before; got != 1 {
			t.Errorf("%s: %d reviews, want 1 (its own)", name, got)
		}
	}

	// Two names: a refusal of one is not reused for the other either.
	rv.allowOnly(authorizationv1.SubjectAccessReviewSpec{})
	before := rv.reviews()
	for _, name := range []string{"x", "y", "x", "y"} {
		g := get
		g.Name = name
		_ = k.Authorize(t.Context(), alice, g)
	}
	if got := rv.reviews() - before; got != 2 {
		t.Errorf("gets of two names twice each: %d reviews, want 2 (one per name, then cached)", got)
	}
}

func mustFields(t *testing.T, s string) fields.Requirements {
	t.Helper()
	sel, err := fields.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Requirements()
}

func mustLabels(t *testing.T, s string) labels.Requirements {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := sel.Requirements()
	return r
}
