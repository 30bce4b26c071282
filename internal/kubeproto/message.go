package kubeproto

import (
	"errors"
	"fmt"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
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
//
// Most JSON is transcoded straight to protobuf (transcode.go); what the
// transcoder gives up on is decoded into the typed object and marshaled.
func Message(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	if p := transcoderPlan(gvk); p != nil {
		msg, err := transcodeMessage(gvk, p, json)
		if !errors.Is(err, errTranscode) {
			return msg, err
		}
	}
	return encodeMessage(gvk, json, true)
}

// encodeMessage is Message, its JSON decoded by decodeFast when fast is
// set, else by decodeAPIServer alone.
func encodeMessage(gvk schema.GroupVersionKind, json []byte, fast bool) ([]byte, error) {
	obj, err := newMessage(gvk)
	if err != nil {
		return nil, err
	}
	decode := decodeAPIServer
	if fast {
		decode = func(json []byte, into any) error { return decodeFast(json, into, obj.Reset) }
	}
	if err := decode(json, obj); err != nil {
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

// decodeAPIServer decodes JSON into a new, empty typed value as
// kube-apiserver decodes a request body (sigs.k8s.io/json: encoding/json,
// case-sensitive names, integers kept in untyped values): the reference
// decodeFast must equal.
func decodeAPIServer(json []byte, into any) error {
	return kjson.UnmarshalCaseSensitivePreserveInts(json, into)
}

// fastOptions are encoding/json's semantics in go-json-experiment's
// decoder (its v1 options), but for names, which match case-sensitively
// as decodeAPIServer's do.
var fastOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false), jsonv1.MatchCaseSensitiveDelimiter(true))

// decodeFast decodes JSON into a new, empty typed value as decodeAPIServer
// does, in half the time (BenchmarkMessage): go-json-experiment reads the
// JSON once, where encoding/json checks it whole before it decodes it. JSON
// it refuses goes to decodeAPIServer, on the value emptied again by reset,
// so that what is accepted and each error are the reference's. The two differ in
// untyped values (integers), which typed objects do not have;
// FuzzMessageDecoders checks that every kind's message is the same.
//
// Other packages that decode cached JSON into typed objects use it as
// DecodeJSON.
func decodeFast(json []byte, into any, reset func()) error {
	if err := jsonv2.Unmarshal(json, into, fastOptions); err != nil {
		reset()
		return decodeAPIServer(json, into)
	}
	return nil
}

// DecodeJSON decodes JSON into into, a new, empty typed value, as
// kube-apiserver decodes a request body, by the faster decoder Message
// uses; reset must empty into again (decodeFast).
func DecodeJSON(json []byte, into any, reset func()) error {
	return decodeFast(json, into, reset)
}

// PartialMessage returns the protobuf message of the PartialObjectMetadata
// the API server makes of an object (meta.AsPartialObjectMetadata) when a
// client asks for "as=PartialObjectMetadata" or "as=PartialObjectMetadataList":
// the object's metadata and nothing else. It reads only the JSON "metadata",
// so it serves custom resources too. The message is the same in meta.k8s.io
// v1 and v1beta1.
func PartialMessage(json []byte) ([]byte, error) {
	if p := planFor(reflect.TypeFor[metav1.PartialObjectMetadata]()); p.err == nil {
		// The object's own apiVersion and kind are not PartialObjectMetadata's.
		if msg, _, _, err := transcode(p, json); err == nil {
			return msg, nil
		}
	}
	return partialMessage(json, true)
}

// partialMessage is PartialMessage, its JSON decoded by decodeFast when
// fast is set, else by decodeAPIServer alone.
func partialMessage(json []byte, fast bool) ([]byte, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	var err error
	if fast {
		err = decodeFast(json, &obj, func() { obj.Metadata = metav1.ObjectMeta{} })
	} else {
		err = decodeAPIServer(json, &obj)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeproto: decode metadata: %w", err)
	}
	partial := metav1.PartialObjectMetadata{ObjectMeta: obj.Metadata}
	msg, err := partial.Marshal()
	if err != nil {
		return nil, fmt.Errorf("kubeproto: encode PartialObjectMetadata: %w", err)
	}
	return msg, nil
}
