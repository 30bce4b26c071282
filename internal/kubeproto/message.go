package kubeproto

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
)

// ErrKindMismatch reports JSON whose apiVersion or kind is not the one asked for.
var ErrKindMismatch = errors.New("kubeproto: JSON is of another kind")

// Message decodes one object's JSON into the typed object of gvk and returns
// its protobuf message: the bytes both an object response (Object) and a list
// item (List) are made of. The JSON may omit apiVersion and kind, as list
// items do; when present they must name gvk.
//
// The JSON is decoded as kube-apiserver decodes a request body (case-sensitive
// field names, unknown fields dropped), so JSON the API server wrote encodes to
// the bytes it would have sent in protobuf.
func Message(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	obj, err := newMessage(gvk)
	if err != nil {
		return nil, err
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(json, obj); err != nil {
		return nil, fmt.Errorf("kubeproto: decode %s: %w", gvk.Kind, err)
	}
	if got := obj.GetObjectKind().GroupVersionKind(); (got.Kind != "" && got.Kind != gvk.Kind) ||
		(got.Version != "" && got.GroupVersion() != gvk.GroupVersion()) {
		return nil, fmt.Errorf("%w: want %s, JSON has %s", ErrKindMismatch, gvk, got)
	}
	msg, err := obj.Marshal()
	if err != nil {
		return nil, fmt.Errorf("kubeproto: encode %s: %w", gvk.Kind, err)
	}
	return msg, nil
}

// PartialMessage returns the protobuf message of the PartialObjectMetadata
// the API server makes of an object (meta.AsPartialObjectMetadata) when a
// client asks for "as=PartialObjectMetadata" or "as=PartialObjectMetadataList":
// the object's metadata and nothing else. It reads only the JSON "metadata",
// so it serves custom resources too. The message is the same in meta.k8s.io
// v1 and v1beta1.
func PartialMessage(json []byte) ([]byte, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(json, &obj); err != nil {
		return nil, fmt.Errorf("kubeproto: decode metadata: %w", err)
	}
	partial := metav1.PartialObjectMetadata{ObjectMeta: obj.Metadata}
	msg, err := partial.Marshal()
	if err != nil {
		return nil, fmt.Errorf("kubeproto: encode PartialObjectMetadata: %w", err)
	}
	return msg, nil
}
