// Package preflight checks a configuration against a cluster before
// informerd runs on it: that every resource exists and that informerd's
// credentials may list and watch it. `informerd --validate-config` prints
// its report.
package preflight

import (
	"context"
	"fmt"
	"io"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/pipeline"
)

// Result is the verdict on one configured resource.
type Result struct {
	Resource string
	// Problems is empty when the resource is fine.
	Problems []string
	// Resolved is set when discovery knows the resource.
	Resolved pipeline.Resolved
}

// Check resolves each resource through mapper and asks the API server, with
// SelfSubjectAccessReviews, whether the caller may list and watch it in the
// configured namespace (all namespaces when none is set).
func Check(ctx context.Context, c *config.Config, mapper meta.RESTMapper, client kubernetes.Interface) ([]Result, error) {
	var out []Result
	for _, r := range c.Resources {
		res := Result{Resource: r.Resource}
		resolved, err := pipeline.Resolve(mapper, r.Resource)
		if err != nil {
			if meta.IsNoMatchError(err) {
				res.Problems = append(res.Problems, "the API server does not serve it (a CRD not installed? a typo? `kubectl api-resources` lists what exists)")
			} else {
				res.Problems = append(res.Problems, "discovery: "+err.Error())
			}
			out = append(out, res)
			continue
		}
		res.Resolved = resolved
		ns := r.Namespace
		if !resolved.Namespaced {
			if ns != "" {
				res.Problems = append(res.Problems, fmt.Sprintf("namespace %q is set, but %s is cluster-scoped: remove it", ns, resolved.CanonicalName()))
			}
			ns = ""
		}
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: resolved.GVR.Group, Resource: resolved.GVR.Resource, Namespace: ns,
				},
			}}
			got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("ask the API server whether %s may be %sed: %w", resolved.CanonicalName(), verb, err)
			}
			if !got.Status.Allowed {
				where := "in all namespaces (a ClusterRole bound with a ClusterRoleBinding)"
				if ns != "" {
					where = "in namespace " + ns
				}
				msg := fmt.Sprintf("forbidden to %s %s %s", verb, resolved.CanonicalName(), where)
				if got.Status.Reason != "" {
					msg += ": " + got.Status.Reason
				}
				res.Problems = append(res.Problems, msg)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// Write prints a report, one line per resource, and returns whether every
// resource passed.
func Write(w io.Writer, results []Result) bool {
	ok := true
	for _, r := range results {
		if len(r.Problems) == 0 {
			fmt.Fprintf(w, "ok    %s (%s, %s)\n", r.Resource, r.Resolved.GVR.String(), r.Resolved.Kind)
			continue
		}
		ok = false
		fmt.Fprintf(w, "FAIL  %s: %s\n", r.Resource, strings.Join(r.Problems, "; "))
	}
	return ok
}
