package auth

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	apimachineryvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/informerd/informerd/internal/config"
)

// NodeField is the object field that binds an object to a node, and
// NodeIndexPath the JSONPath of an index that reads it: an index with this
// JSONPath selects a node's objects, as the field selector
// spec.nodeName=<node> does at the API server.
const (
	NodeField     = "spec.nodeName"
	NodeIndexPath = "{.spec.nodeName}"
)

// ServiceAccount names a ServiceAccount.
type ServiceAccount struct{ Namespace, Name string }

func (s ServiceAccount) String() string { return s.Namespace + ":" + s.Name }

// ParseServiceAccounts reads "namespace:name,namespace:name" (the form of
// --node-bound-service-accounts); empty is none.
func ParseServiceAccounts(s string) ([]ServiceAccount, error) {
	var out []ServiceAccount
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ns, name, ok := strings.Cut(entry, ":")
		if !ok || len(apimachineryvalidation.IsDNS1123Label(ns)) > 0 || len(apimachineryvalidation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("%q: want namespace:name of a ServiceAccount, e.g. informerd:informerd-leaf", entry)
		}
		out = append(out, ServiceAccount{Namespace: ns, Name: name})
	}
	return out, nil
}

// NodeBinding confines ServiceAccounts to the node their token is bound
// to, as the API server's Node authorizer confines a kubelet: a projected
// token of a pod carries the pod's node (KEP-4193, user extra
// authentication.kubernetes.io/node-name and node-uid), and a caller
// authenticated as one of the named ServiceAccounts may read of a
// node-scoped resource only the objects of that node, selected by a list
// or watch. A resource is node-scoped when its configuration has an index
// with JSONPath {.spec.nodeName}; pods always are, so a configuration
// without that index refuses node-bound callers every pod. Other
// resources are left to the authorizer NodeBinding restricts: it grants
// nothing. A named ServiceAccount whose token carries no node is refused
// everything.
//
// A NodeBinding is immutable and safe for concurrent use; the nil
// NodeBinding binds no one.
type NodeBinding struct {
	accounts map[string]bool     // by user name, system:serviceaccount:<ns>:<name>
	indexes  map[string][]string // configured resource name -> its node indexes
}

// NewNodeBinding binds accounts to their node, over the configured
// resources. It returns nil, which binds no one, for no accounts.
func NewNodeBinding(accounts []ServiceAccount, resources []config.Resource) *NodeBinding {
	if len(accounts) == 0 {
		return nil
	}
	n := &NodeBinding{accounts: map[string]bool{}, indexes: map[string][]string{}}
	for _, a := range accounts {
		n.accounts[serviceaccount.MakeUsername(a.Namespace, a.Name)] = true
	}
	for _, r := range resources {
		for _, ix := range r.Indexes {
			if ix.JSONPath == NodeIndexPath {
				n.indexes[r.Resource] = append(n.indexes[r.Resource], ix.Name)
			}
		}
	}
	return n
}

// Restrict refuses a when u is a bound ServiceAccount and a reaches past
// u's node, with a Forbidden *Error whose reason says what is allowed.
// Otherwise it returns the attributes to authorize next: a itself, or for
// a read of a node-scoped resource selected by the node index, a with the
// field selector spec.nodeName=<node> that the same read has at the API
// server, so that the SubjectAccessReview is asked what the API server
// would be asked (an index selection has no word there).
func (n *NodeBinding) Restrict(u user.Info, a Attributes) (Attributes, error) {
	if n == nil || !n.accounts[u.GetName()] {
		return a, nil
	}
	node, ok := nodeOf(u)
	if !ok {
		return a, forbidden(u, a, fmt.Sprintf("%s is bound to its node (--node-bound-service-accounts), and its token names no node "+
			"(user extra %s and %s): send the projected token of a pod scheduled on a node (a serviceAccountToken volume), not a token made for the ServiceAccount alone",
			u.GetName(), serviceaccount.NodeNameKey, serviceaccount.NodeUIDKey))
	}
	indexes, scoped := n.indexes[a.Configured]
	if !scoped && !(a.Group == "" && a.Resource == "pods") {
		return a, nil
	}
	if len(indexes) == 0 {
		return a, forbidden(u, a, fmt.Sprintf("%s is bound to node %q, and %s has no index with JSONPath %s in informerd's configuration to select that node's objects by; add one",
			u.GetName(), node, a.Configured, NodeIndexPath))
	}
	allowed := fmt.Sprintf("%s is bound to node %q (--node-bound-service-accounts): it may only list and watch the %s of that node, "+
		"selected by index %q with the one value %q, or by field selector %s=%s", u.GetName(), node, a.Resource, indexes[0], node, NodeField, node)
	if a.Verb != "list" && a.Verb != "watch" {
		return a, forbidden(u, a, allowed)
	}
	byIndex := slices.Contains(indexes, a.Index) && len(a.IndexValues) > 0 &&
		!slices.ContainsFunc(a.IndexValues, func(v string) bool { return v != node })
	byField := slices.ContainsFunc(a.FieldSelector, func(r fields.Requirement) bool { return isNode(r, node) })
	switch {
	case byField:
	case byIndex:
		a.FieldSelector = append(slices.Clone(a.FieldSelector), fields.Requirement{Field: NodeField, Operator: selection.Equals, Value: node})
	default:
		return a, forbidden(u, a, allowed)
	}
	return a, nil
}

// isNode says whether r selects exactly the objects of node.
func isNode(r fields.Requirement, node string) bool {
	return r.Field == NodeField && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node
}

// nodeOf is the node u's token is bound to: one node name and one node
// uid in its extra, both set. The uid is there only when the node existed
// when the token was issued, as it does for a kubelet's pod.
func nodeOf(u user.Info) (string, bool) {
	extra := u.GetExtra()
	name, uid := extra[serviceaccount.NodeNameKey], extra[serviceaccount.NodeUIDKey]
	if len(name) != 1 || len(uid) != 1 || name[0] == "" || uid[0] == "" {
		return "", false
	}
	return name[0], true
}
