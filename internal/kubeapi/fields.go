package kubeapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/buger/jsonparser"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/pipeline"
)

// fieldSet is what a resource's field selectors may name, as kube-apiserver
// v1.37.2 defines it: the labels its field label conversion accepts for the
// kind (k8s.io/kubernetes pkg/apis/*/v1 conversion.go, or apimachinery's
// default of metadata.name and metadata.namespace; a CRD's
// selectableFields), each mapped to a field of the object's selectable
// field set (the registry's ToSelectableFields), and how that field's value
// is read from the object's JSON. A field the set does not hold selects as
// "", as the API server's fields.Set does.
type fieldSet struct {
	// accept maps an accepted label to the field it selects on.
	accept map[string]string
	// refuse words the conversion's error for a label it does not accept.
	refuse func(label string) error
	// values reads each field of the set from an object's JSON.
	values map[string]fieldValue
}

// fieldValue reads one selectable field from an object's JSON.
type fieldValue func(data []byte) string

// value returns field's value in data: "" when the set does not hold it.
func (s *fieldSet) value(field string, data []byte) string {
	if v, ok := s.values[field]; ok {
		return v(data)
	}
	return ""
}

// str reads a string at path, "" when absent.
func str(path ...string) fieldValue {
	return func(data []byte) string {
		v, err := jsonparser.GetString(data, path...)
		if err != nil {
			return ""
		}
		return v
	}
}

// scalar reads a number or boolean at path as its JSON text, def when
// absent (the Go zero value the API server's struct would hold).
func scalar(def string, path ...string) fieldValue {
	return func(data []byte) string {
		v, typ, _, err := jsonparser.Get(data, path...)
		if err != nil || typ == jsonparser.NotExist || typ == jsonparser.Null {
			return def
		}
		if typ == jsonparser.String {
			s, _ := jsonparser.ParseString(v)
			return s
		}
		return string(v)
	}
}

// firstOf is the first non-empty of vs (an event's source: its
// source.component, else its reportingComponent).
func firstOf(vs ...fieldValue) fieldValue {
	return func(data []byte) string {
		for _, v := range vs {
			if s := v(data); s != "" {
				return s
			}
		}
		return ""
	}
}

// notSupported is the API server's most common conversion error.
func notSupported(label string) error { return fmt.Errorf("field label not supported: %s", label) }

// defaultRefusal is apimachinery's DefaultMetaV1FieldSelectorConversion
// error, for kinds without a conversion of their own.
func defaultRefusal(label string) error {
	return fmt.Errorf("%q is not a known field selector: only %q, %q", label, fieldName, fieldNamespace)
}

// objectMeta adds the metadata fields of the registry's
// ObjectMetaFieldsSet: metadata.name, and metadata.namespace for a
// namespaced kind.
func objectMeta(values map[string]fieldValue, namespaced bool) map[string]fieldValue {
	values[fieldName] = str("metadata", "name")
	if namespaced {
		values[fieldNamespace] = str("metadata", "namespace")
	}
	return values
}

// same maps each label to itself.
func same(labels ...string) map[string]string {
	m := make(map[string]string, len(labels))
	for _, l := range labels {
		m[l] = l
	}
	return m
}

// builtinFields are the kinds with a field label conversion of their own
// in v1.37.2, by group, version and kind.
var builtinFields = map[schema.GroupVersionKind]func() *fieldSet{
	{Version: "v1", Kind: "Pod"}: func() *fieldSet {
		accept := same(fieldName, fieldNamespace, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
			"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName")
		accept["spec.host"] = "spec.nodeName" // old v1 clients
		return &fieldSet{accept: accept, refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"spec.nodeName":            str("spec", "nodeName"),
			"spec.restartPolicy":       str("spec", "restartPolicy"),
			"spec.schedulerName":       str("spec", "schedulerName"),
			"spec.serviceAccountName":  str("spec", "serviceAccountName"),
			"spec.hostNetwork":         scalar("false", "spec", "hostNetwork"),
			"status.phase":             str("status", "phase"),
			"status.podIP":             str("status", "podIPs", "[0]", "ip"),
			"status.nominatedNodeName": str("status", "nominatedNodeName"),
			// status.podIPs is accepted but not in the set: it selects as "".
		}, true)}
	},
	{Version: "v1", Kind: "Node"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, "spec.unschedulable"), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"spec.unschedulable": scalar("false", "spec", "unschedulable"),
		}, false)}
	},
	{Version: "v1", Kind: "ReplicationController"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, fieldNamespace, "status.replicas"), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"status.replicas": scalar("0", "status", "replicas"),
		}, true)}
	},
	{Version: "v1", Kind: "Event"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, fieldNamespace, "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
			"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
			"reason", "reportingComponent", "source", "type"), refuse: notSupported, values: objectMeta(coreEventValues(
			"involvedObject", "reportingComponent", []string{"source", "component"}), true)}
	},
	{Group: "events.k8s.io", Version: "v1", Kind: "Event"}: func() *fieldSet {
		accept := map[string]string{"reason": "reason", "type": "type", fieldNamespace: fieldNamespace, fieldName: fieldName,
			"reportingController": "reportingComponent"}
		for _, f := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
			accept["regarding."+f] = "involvedObject." + f
		}
		return &fieldSet{accept: accept, refuse: notSupported, values: objectMeta(coreEventValues(
			"regarding", "reportingController", []string{"deprecatedSource", "component"}), true)}
	},
	{Version: "v1", Kind: "Namespace"}: func() *fieldSet {
		return &fieldSet{accept: same("status.phase", fieldName), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"status.phase": str("status", "phase"),
		}, false)}
	},
	{Version: "v1", Kind: "Secret"}: func() *fieldSet {
		return &fieldSet{accept: same("type", fieldNamespace, fieldName), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"type": str("type"),
		}, true)}
	},
	{Version: "v1", Kind: "Service"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldNamespace, fieldName, "spec.clusterIP", "spec.type"), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"spec.clusterIP": str("spec", "clusterIP"),
			"spec.type":      str("spec", "type"),
		}, true)}
	},
	{Group: "batch", Version: "v1", Kind: "Job"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, fieldNamespace, "status.successful"),
			refuse: func(label string) error { return fmt.Errorf("field label %q not supported for Job", label) },
			values: objectMeta(map[string]fieldValue{"status.successful": scalar("0", "status", "succeeded")}, true)}
	},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, "spec.signerName"), refuse: notSupported, values: objectMeta(map[string]fieldValue{
			"spec.signerName": str("spec", "signerName"),
		}, false)}
	},
	{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceSlice"}: func() *fieldSet {
		return &fieldSet{accept: same(fieldName, "spec.nodeName", "spec.driver", "spec.pool.name"),
			refuse: func(label string) error {
				return fmt.Errorf("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: %s", label)
			},
			values: objectMeta(map[string]fieldValue{
				"spec.nodeName":  str("spec", "nodeName"),
				"spec.driver":    str("spec", "driver"),
				"spec.pool.name": str("spec", "pool", "name"),
			}, false)}
	},
}

// coreEventValues are the registry's Event fields, read from an Event's
// JSON whose involved object is at regarding and whose reporting
// controller and source component are at the given paths (core/v1 and
// events.k8s.io/v1 name them otherwise).
func coreEventValues(regarding, reporting string, source []string) map[string]fieldValue {
	v := map[string]fieldValue{
		"reason":             str("reason"),
		"reportingComponent": str(reporting),
		"source":             firstOf(str(source...), str(reporting)),
		"type":               str("type"),
	}
	for _, f := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
		v["involvedObject."+f] = str(regarding, f)
	}
	return v
}

// fieldsFor returns res's field set, read when first asked for: a custom
// resource's selectableFields come with its printer columns, from its CRD.
func (h *Handler) fieldsFor(ctx context.Context, res pipeline.Served) func() *fieldSet {
	return func() *fieldSet {
		var selectable []string
		custom := !builtin(res.Resolved())
		if custom {
			selectable = h.columns.get(ctx, res.Resolved().GVR).selectable
		}
		return fieldsOf(kindOf(res), res.Resolved().Namespaced, selectable, custom)
	}
}

// fieldsOf returns the field set of a resource of kind; namespaced is its
// scope; custom, for a custom resource, its CRD's selectableFields'
// JSONPaths for the version (nil for a built-in kind).
func fieldsOf(kind schema.GroupVersionKind, namespaced bool, custom []string, isCustom bool) *fieldSet {
	if f, ok := builtinFields[kind]; ok {
		return f()
	}
	s := &fieldSet{accept: same(fieldName, fieldNamespace), refuse: defaultRefusal, values: objectMeta(map[string]fieldValue{}, namespaced)}
	if isCustom {
		s.refuse = notSupported
		for _, p := range custom {
			name := strings.TrimPrefix(p, ".")
			s.accept[name] = name
			s.values[name] = scalar("", strings.Split(name, ".")...)
		}
	}
	return s
}
