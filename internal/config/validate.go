package config

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
)

// NamespaceIndex is the index every resource has, by metadata.namespace.
const NamespaceIndex = "namespace"

// Validate reports every problem in c at once, each naming its field.
func (c *Config) Validate() error {
	var errs field.ErrorList
	root := field.NewPath("")
	resources := field.NewPath("resources")
	if len(c.Resources) == 0 {
		errs = append(errs, field.Required(resources, "list at least one resource to cache, e.g. `- resource: pods`"))
	}
	seen := map[string]int{}
	for i, r := range c.Resources {
		p := resources.Index(i)
		errs = append(errs, r.validate(p)...)
		if j, dup := seen[r.Resource]; dup {
			errs = append(errs, field.Duplicate(p.Child("resource"),
				fmt.Sprintf("%s (already at resources[%d]); a resource is served under one name, so list it once", r.Resource, j)))
		} else {
			seen[r.Resource] = i
		}
	}
	if c.History.MaxEvents < 0 {
		errs = append(errs, field.Invalid(root.Child("history", "maxEvents"), c.History.MaxEvents, "must be positive"))
	}
	if c.History.MaxAge.Duration < 0 {
		errs = append(errs, field.Invalid(root.Child("history", "maxAge"), c.History.MaxAge.String(), "must be positive"))
	}
	if c.QueueLength < 0 {
		errs = append(errs, field.Invalid(root.Child("queueLength"), c.QueueLength, "must be positive"))
	}
	errs = append(errs, c.validateClients()...)
	return errs.ToAggregate()
}

func (r Resource) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Resource == "" {
		errs = append(errs, field.Required(p.Child("resource"), "a kubectl-style name such as pods, deployments.apps or widgets.v1.example.com"))
	} else if err := validResourceName(r.Resource); err != "" {
		errs = append(errs, field.Invalid(p.Child("resource"), r.Resource, err))
	}
	if r.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(r.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), r.Namespace, msg))
		}
	}
	if _, err := labels.Parse(r.LabelSelector); err != nil {
		errs = append(errs, field.Invalid(p.Child("labelSelector"), r.LabelSelector, err.Error()))
	}
	if _, err := fields.ParseSelector(r.FieldSelector); err != nil {
		errs = append(errs, field.Invalid(p.Child("fieldSelector"), r.FieldSelector, err.Error()))
	}
	if u := r.UpstreamSelector; u != nil {
		errs = append(errs, u.validate(p.Child("upstreamSelector"))...)
	}
	names := map[string]bool{NamespaceIndex: true}
	for j, ix := range r.Indexes {
		ip := p.Child("indexes").Index(j)
		errs = append(errs, ix.validate(ip)...)
		if ix.Name == NamespaceIndex {
			errs = append(errs, field.Invalid(ip.Child("name"), ix.Name, "is built in for every resource; choose another name"))
		} else if names[ix.Name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), ix.Name))
		}
		names[ix.Name] = true
	}
	return errs
}

func (ix Index) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ix.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "clients select by this name"))
	} else {
		for _, msg := range validation.IsDNS1123Label(ix.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ix.Name, msg))
		}
	}
	switch {
	case ix.JSONPath == "" && ix.Label == "":
		errs = append(errs, field.Required(p, "set one of jsonpath (e.g. \"{.spec.nodeName}\") or label (e.g. app)"))
	case ix.JSONPath != "" && ix.Label != "":
		errs = append(errs, field.Forbidden(p, "set only one of jsonpath and label"))
	case ix.Label != "":
		for _, msg := range validation.IsQualifiedName(ix.Label) {
			errs = append(errs, field.Invalid(p.Child("label"), ix.Label, msg))
		}
	default:
		if err := jsonpath.New(ix.Name).Parse(ix.JSONPath); err != nil {
			errs = append(errs, field.Invalid(p.Child("jsonpath"), ix.JSONPath, err.Error()))
		}
	}
	return errs
}

// validResourceName checks the shape of a kubectl-style resource name and
// returns a message when it is wrong. Whether it exists is checked against
// the API server's discovery at run time.
func validResourceName(name string) string {
	if name != strings.ToLower(name) {
		return "must be lower case, as kubectl writes it (plural name, e.g. pods, not Pod)"
	}
	for _, part := range strings.Split(name, ".") {
		if len(validation.IsDNS1123Label(part)) > 0 {
			return "must be <plural>, <plural>.<group> or <plural>.<version>.<group>, each part a DNS label"
		}
	}
	return ""
}

func (u *UpstreamSelector) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if u.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(u.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), u.Namespace, msg))
		}
	}
	if _, err := labels.Parse(u.LabelSelector); err != nil {
		errs = append(errs, field.Invalid(p.Child("labelSelector"), u.LabelSelector, err.Error()))
	}
	if ix := u.Index; ix != nil {
		if ix.Name == "" {
			errs = append(errs, field.Required(p.Child("index", "name"), "the name of one of the upstream's indexes for the resource, e.g. node"))
		}
		if len(ix.Values) == 0 {
			errs = append(errs, field.Required(p.Child("index", "values"), "at least one value, e.g. [\"${NODE_NAME}\"]"))
		}
		for i, v := range ix.Values {
			if v == "" {
				errs = append(errs, field.Invalid(p.Child("index", "values").Index(i), v, "is empty (an environment variable it names may be set but empty)"))
			}
		}
	}
	return errs
}

// expandEnv replaces ${NAME} in the upstream selectors' values with the
// environment's, refusing a name that is not set: a DaemonSet that forgot
// to pass NODE_NAME must not take every node's objects, or none.
func (c *Config) expandEnv(lookup func(string) (string, bool)) error {
	var errs field.ErrorList
	for i := range c.Resources {
		u := c.Resources[i].UpstreamSelector
		if u == nil {
			continue
		}
		p := field.NewPath("resources").Index(i).Child("upstreamSelector")
		expand := func(fp *field.Path, s *string) {
			var missing []string
			out := os.Expand(*s, func(name string) string {
				v, ok := lookup(name)
				if !ok {
					missing = append(missing, name)
				}
				return v
			})
			if len(missing) > 0 {
				errs = append(errs, field.Invalid(fp, *s, fmt.Sprintf("names %s, which is not set in the environment (in a DaemonSet, set it from the downward API: env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}])", strings.Join(missing, ", "))))
				return
			}
			*s = out
		}
		expand(p.Child("namespace"), &u.Namespace)
		expand(p.Child("labelSelector"), &u.LabelSelector)
		if u.Index != nil {
			for j := range u.Index.Values {
				expand(p.Child("index", "values").Index(j), &u.Index.Values[j])
			}
		}
	}
	return errs.ToAggregate()
}
