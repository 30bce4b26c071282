package pipeline

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Mapper is the RESTMapper the pipelines resolve names with; Reset drops
// its discovery cache so a newly installed CRD is found.
type Mapper interface {
	meta.RESTMapper
	meta.ResettableRESTMapper
}

// Resolve turns a kubectl-style name ("pods", "deployments.apps",
// "widgets.v1.example.com") into the resource's GVR, kind and scope, the way
// kubectl does: a fully qualified plural.version.group first, else
// plural.group at the preferred version.
func Resolve(mapper meta.RESTMapper, name string) (Resolved, error) {
	var gvr schema.GroupVersionResource
	full, gr := schema.ParseResourceArg(name)
	var err error
	if full != nil {
		gvr, err = mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		gvr, err = mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return Resolved{}, err
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return Resolved{}, err
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Resolved{}, fmt.Errorf("rest mapping for %s: %w", gvk, err)
	}
	return Resolved{
		GVR:        gvr,
		Kind:       gvk.Kind,
		Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}, nil
}
