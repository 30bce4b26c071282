package config

import (
	"fmt"
	"net/url"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// All matches every resource or every namespace in an MTLSClient rule.
const All = "*"

// MTLSClient is what one client certificate identity may read when informerd
// runs with --auth-mode=mtls. A certificate's identities are its URI SANs
// (e.g. a SPIFFE ID) and its subject common name.
type MTLSClient struct {
	// URI matches a URI SAN exactly; CommonName the subject CN. Set one.
	URI        string `json:"uri,omitempty"`
	CommonName string `json:"commonName,omitempty"`
	// Resources the client may get, list and watch, by their names under
	// resources (or "*" for all).
	Resources []string `json:"resources"`
	// Namespaces it may read in (or "*" for all, which also allows reads
	// across all namespaces and of cluster-scoped resources).
	Namespaces []string `json:"namespaces"`
}

func (c *Config) validateClients() field.ErrorList {
	var errs field.ErrorList
	configured := sets.New[string]()
	for _, r := range c.Resources {
		configured.Insert(r.Resource)
	}
	seen := map[string]int{}
	for i, cl := range c.MTLSClients {
		p := field.NewPath("mtlsClients").Index(i)
		id := ""
		switch {
		case cl.URI == "" && cl.CommonName == "":
			errs = append(errs, field.Required(p, "set uri (a URI SAN such as spiffe://cluster.local/ns/a/sa/reader) or commonName"))
		case cl.URI != "" && cl.CommonName != "":
			errs = append(errs, field.Forbidden(p, "set only one of uri and commonName; list the other as its own entry"))
		case cl.URI != "":
			id = "uri:" + cl.URI
			if u, err := url.Parse(cl.URI); err != nil || u.Scheme == "" {
				errs = append(errs, field.Invalid(p.Child("uri"), cl.URI, "must be an absolute URI"))
			}
		default:
			id = "cn:" + cl.CommonName
		}
		if j, dup := seen[id]; dup && id != "" {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("same identity as mtlsClients[%d]; merge the two", j)))
		} else {
			seen[id] = i
		}
		if len(cl.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), `names from resources, or "*"`))
		}
		for j, r := range cl.Resources {
			if r != All && !configured.Has(r) {
				errs = append(errs, field.NotSupported(p.Child("resources").Index(j), r, append(sets.List(configured), All)))
			}
		}
		if len(cl.Namespaces) == 0 {
			errs = append(errs, field.Required(p.Child("namespaces"), `namespace names, or "*" for all`))
		}
		for j, ns := range cl.Namespaces {
			if ns == All {
				continue
			}
			for _, msg := range validation.IsDNS1123Label(ns) {
				errs = append(errs, field.Invalid(p.Child("namespaces").Index(j), ns, msg))
			}
		}
	}
	return errs
}
