package kubeproto

import "k8s.io/apimachinery/pkg/runtime/schema"

// MessageAPIServer is Message with the JSON decoded only as kube-apiserver
// decodes it: the reference for Message's faster decoder.
func MessageAPIServer(gvk schema.GroupVersionKind, json []byte) ([]byte, error) {
	return encodeMessage(gvk, json, false)
}

// PartialMessageAPIServer is PartialMessage with the JSON decoded only as
// kube-apiserver decodes it.
func PartialMessageAPIServer(json []byte) ([]byte, error) {
	return partialMessage(json, false)
}
