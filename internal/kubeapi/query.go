package kubeapi

import (
	"net/url"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/shard"
)

// listOptions decodes and validates a list or watch request's query as the
// API server does: its parameter codec, its defaults (a watch from "" or
// "0" sends initial events) and its validation, with the same 400 and 422
// answers. Parameters it does not know are ignored, as the API server
// ignores them; so is a limit of 0 or less (no limit).
func listOptions(query url.Values, watch bool) (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	opts.Watch = opts.Watch || watch
	metainternalversion.SetListOptionsDefaults(opts, true)
	if errs := metainternalversionvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return opts, nil
}

// Field paths every resource can select on.
const (
	fieldName      = "metadata.name"
	fieldNamespace = "metadata.namespace"
)

// selector is a request's label and field selectors in the fan-out's form.
// An equality on an indexed field narrows through the index (sel.Index);
// the rest of the field selector is checked on each object (sel.Fields).
type selector struct {
	sel fanout.Selection
	// name is set when the field selector requires metadata.name to equal
	// it (kubectl get NAME -w).
	name string
	// shard is the request's shardSelector (KEP-5866), nil for none; it
	// is part of sel.Fields.
	shard *shard.Selector
}

// newSelector compiles opts' selectors for a resource whose selectable
// fields are fields (called only when there is a field selector), whose
// indexes are indexNames (in object.Values order) and whose indexed fields
// are indexFields (field path → index name). A field the API server does
// not accept for the kind is its 400, in its words, indexed or not. An
// equality on an indexed field is served through the index; any other
// field is read from each object's JSON.
func newSelector(opts *metainternalversion.ListOptions, namespace string, fields func() *fieldSet, indexNames []string, indexFields map[string]string) (selector, error) {
	s := selector{sel: fanout.Selection{Namespace: namespace, Labels: opts.LabelSelector, Index: -1}}
	shard, err := shardSelector(opts.ShardSelector)
	if err != nil {
		return s, err
	}
	s.shard = shard
	if opts.FieldSelector == nil || opts.FieldSelector.Empty() {
		if shard != nil {
			s.sel.Fields = shard.Matches
		}
		return s, nil
	}
	fs := fields()
	type check struct {
		index int    // position in Values, or -1 for name, -2 for namespace, -3 read from the JSON
		field string // for -3
		op    selection.Operator
		value string
	}
	var checks []check
	for _, req := range opts.FieldSelector.Requirements() {
		field, ok := fs.accept[req.Field]
		if !ok {
			return s, apierrors.NewBadRequest(fs.refuse(req.Field).Error())
		}
		c := check{op: req.Operator, value: req.Value, field: field}
		switch field {
		case fieldName:
			c.index = -1
			if req.Operator != selection.NotEquals {
				s.name = req.Value
			}
		case fieldNamespace:
			c.index = -2
		default:
			c.index = -3
			if name, ok := indexFields[field]; ok {
				if i := slices.Index(indexNames, name); i >= 0 {
					c.index = i
					// The first equality on an indexed field is served
					// through its index; an empty value (the field absent)
					// is in no index.
					if s.sel.Index < 0 && req.Operator != selection.NotEquals && req.Value != "" {
						s.sel.Index, s.sel.Values = i, []string{req.Value}
					}
				}
			}
		}
		checks = append(checks, c)
	}
	s.sel.Fields = func(o *object.Object) bool {
		if shard != nil && !shard.Matches(o) {
			return false
		}
		for _, c := range checks {
			var has bool
			switch c.index {
			case -1:
				has = o.Name == c.value
			case -2:
				has = o.Namespace == c.value
			case -3:
				data, err := o.Bytes()
				if err != nil {
					// Selected, so that serving it fails with the
					// damage rather than a list that lacks it.
					return true
				}
				has = fs.value(c.field, data) == c.value
			default:
				has = c.index < len(o.Values) && slices.Contains(o.Values[c.index], c.value)
				if c.value == "" && (c.index >= len(o.Values) || len(o.Values[c.index]) == 0) {
					has = true // an absent field selects as ""
				}
			}
			if has == (c.op == selection.NotEquals) {
				return false
			}
		}
		return true
	}
	return s, nil
}

// everything reports whether the selectors select every object (the
// namespace aside, which is the path's): the API server's empty predicate.
func (s selector) everything() bool {
	return (s.sel.Labels == nil || s.sel.Labels.Empty()) && s.sel.Fields == nil
}
