package kubeproto

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MessageAPIServer is Message with the JSON decoded only as kube-apiserver
// decodes it: the reference for Message's faster decoder.
func MessageAPIServer(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	return encodeMessage(gvk, json, false)
}

// MessageTyped is Message without the transcoder: the JSON decoded into
// the typed object by the faster decoder, then marshaled.
func MessageTyped(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	return encodeMessage(gvk, json, true)
}

// PartialMessageAPIServer is PartialMessage with the JSON decoded only as
// kube-apiserver decodes it.
func PartialMessageAPIServer(json []byte) ([]byte, error) {
	return partialMessage(json, false)
}

// ErrTranscode is the transcoder giving up, leaving the JSON to the typed path.
var ErrTranscode = errTranscode

// Transcode is Message by the transcoder alone: ErrTranscode where Message
// would decode the typed object instead.
func Transcode(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	p := transcoderPlan(gvk)
	if p == nil {
		return nil, errTranscode
	}
	return transcodeMessage(gvk, p, json)
}

// TranscoderServes returns why the transcoder does not serve gvk's
// objects, nil when it does.
func TranscoderServes(gvk schema.GroupVersionKind) error {
	obj, err := newMessage(gvk)
	if err != nil {
		return err
	}
	return planFor(reflect.TypeOf(obj).Elem()).err
}
