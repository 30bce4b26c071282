package kubeapi

import (
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// Media types informerd answers cached reads in: JSON, and YAML for a get
// or list (converted from the JSON), as the API server does; protobuf for
// built-in types.
const (
	mediaJSON = iota
	mediaYAML
	mediaProtobuf
)

// What a read's objects are converted to (the Accept header's as=).
const (
	asObject = iota
	asTable
	asMetadata     // PartialObjectMetadata: a get's object, a watch's events
	asMetadataList // PartialObjectMetadataList: a list
	// asNothing: a watch that asked for PartialObjectMetadataList, which
	// no event can be converted to; the API server's encoder fails on the
	// first event and the stream ends.
	asNothing
)

// output is what a cached read answers in, negotiated once from its
// Accept header as the API server negotiates it
// (negotiation.NegotiateOutputMediaType with its RequestScope's
// restrictions).
type output struct {
	media int
	as    int
	// metaGV is the group version of a conversion (meta.k8s.io/v1 or
	// v1beta1).
	metaGV schema.GroupVersion
	// dropManagedFields is KEP-5958's drop=metadata.managedFields: the
	// objects without metadata.managedFields.
	dropManagedFields bool
	table             tableOptions
}

// serializerInfo describes a media type for the API server's negotiation,
// which reads only these fields.
func serializerInfo(mediaType string, text, stream bool) runtime.SerializerInfo {
	typ, sub, _ := strings.Cut(mediaType, "/")
	info := runtime.SerializerInfo{MediaType: mediaType, MediaTypeType: typ, MediaTypeSubType: sub, EncodesAsText: text}
	if stream {
		info.StreamSerializer = &runtime.StreamSerializerInfo{EncodesAsText: text}
	}
	return info
}

var (
	jsonInfo     = serializerInfo(runtime.ContentTypeJSON, true, true)
	yamlInfo     = serializerInfo(runtime.ContentTypeYAML, true, false)
	protobufInfo = serializerInfo(runtime.ContentTypeProtobuf, false, true)
)

// mediaTypes lists what the API server serves a resource in, in its
// order: its codecs' JSON, YAML and protobuf (CBOR is behind an alpha
// gate in v1.37). For a custom resource protobuf is listed but allowed
// only for a conversion (a Table or PartialObjectMetadata), as the API
// server's CRD handler restricts its StandardSerializers.
type mediaTypes struct{ builtin bool }

func (m mediaTypes) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{jsonInfo, yamlInfo, protobufInfo}
}

// EncoderForVersion and DecoderToVersion are not used by negotiation.
func (mediaTypes) EncoderForVersion(runtime.Encoder, runtime.GroupVersioner) runtime.Encoder {
	return nil
}

func (mediaTypes) DecoderToVersion(runtime.Decoder, runtime.GroupVersioner) runtime.Decoder {
	return nil
}

// AllowsMediaTypeTransform is the API server's RequestScope rule: a
// Table in JSON or YAML, PartialObjectMetadata[List] in any media type,
// no other conversion; without one, a custom resource in JSON or YAML.
func (m mediaTypes) AllowsMediaTypeTransform(typ, sub string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		return m.builtin || (typ == "application" && (sub == "json" || sub == "yaml"))
	}
	if gvk.GroupVersion() != metav1.SchemeGroupVersion && gvk.GroupVersion() != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch gvk.Kind {
	case "Table":
		return typ == "application" && (sub == "json" || sub == "yaml")
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		return true
	}
	return false
}

func (mediaTypes) AllowsServerVersion(string) bool { return false }

func (mediaTypes) AllowsStreamSchema(s string) bool { return s == "watch" }

var (
	_ runtime.NegotiatedSerializer     = mediaTypes{}
	_ negotiation.EndpointRestrictions = mediaTypes{}
)

// negotiateOutput negotiates r's answer for a resource of kind (builtin:
// one the API server encodes from Go structs, in protobuf too) and verb:
// the API server's 406 when r accepts nothing it serves, its 400 for bad
// Table options, and for a conversion a read cannot have
// (PartialObjectMetadata of a list, PartialObjectMetadataList of one
// object) its 406, which names the Go type it would have converted.
func negotiateOutput(r *http.Request, kind schema.GroupVersionKind, builtin bool, verb string) (*output, error) {
	types := mediaTypes{builtin: builtin}
	goType := "*unstructured.Unstructured"
	if builtin {
		goType = "*" + internalPackage(kind.Group) + "." + kind.Kind
	}
	mt, info, err := negotiation.NegotiateOutputMediaType(r, types, types)
	if err != nil {
		if builtin && !routeProduces(r.Header.Get("Accept")) {
			// The API server's router (go-restful) refuses it before its
			// handler, in its own words.
			produces := "application/json, application/yaml, application/vnd.kubernetes.protobuf"
			if verb != "get" {
				produces += ", application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
			}
			return nil, notAcceptable("406: Not Acceptable\n\nAvailable representations: " + produces)
		}
		return nil, err
	}
	out := &output{}
	switch info.MediaType {
	case runtime.ContentTypeYAML:
		out.media = mediaYAML
	case runtime.ContentTypeProtobuf:
		out.media = mediaProtobuf
	}
	if verb == "watch" {
		// The stream's own negotiation: YAML has no stream framing.
		if _, err := negotiation.NegotiateOutputMediaTypeStream(r, types, types); err != nil {
			return out, err
		}
	}
	if c := mt.Convert; c != nil {
		out.metaGV = c.GroupVersion()
		switch c.Kind {
		case "Table":
			out.as = asTable
			out.table = tableOptionsOf(r)
			if out.table.err != nil {
				return nil, out.table.err
			}
		case "PartialObjectMetadata":
			if verb == "list" {
				return nil, notAcceptable("you requested PartialObjectMetadata, but the requested object is a list (" + goType + "List)")
			}
			out.as = asMetadata
		case "PartialObjectMetadataList":
			switch verb {
			case "get":
				return nil, notAcceptable("you requested PartialObjectMetadataList, but the requested object is not a list (" + goType + ")")
			case "list":
				out.as = asMetadataList
			case "watch":
				out.as = asNothing
			}
		}
	}
	out.dropManagedFields = dropsManagedFields(r.Header.Get("Accept"), info.MediaType)
	return out, nil
}

// internalPackage names the Go package of the API server's internal type
// for a built-in group, which its conversion errors print: core for the
// legacy group (and events.k8s.io, whose Event is core's), else the
// group's first label (apps, rbac, scheduling, ...).
func internalPackage(group string) string {
	switch group {
	case "", "events.k8s.io":
		return "core"
	}
	first, _, _ := strings.Cut(group, ".")
	return first
}

// routeProduces reports whether a clause of accept names a media type the
// API server's routes for built-in resources produce (JSON, YAML,
// protobuf, or a wildcard), whatever its parameters: go-restful's check
// before the handler negotiates.
func routeProduces(accept string) bool {
	for _, clause := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(clause, ";")
		switch strings.TrimSpace(mt) {
		case "*/*", "application/*", runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeProtobuf:
			return true
		}
	}
	return false
}

// dropsManagedFields reports whether the Accept clause of the negotiated
// media type asks for KEP-5958's drop=metadata.managedFields (a
// comma-separated list of fields in the drop parameter).
func dropsManagedFields(accept, mediaType string) bool {
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil || params["drop"] == "" {
			continue
		}
		if mt != mediaType && mt != "*/*" && mt != "application/*" {
			continue
		}
		for _, f := range strings.Split(params["drop"], " ") {
			if f == "metadata.managedFields" {
				return true
			}
		}
	}
	return false
}
