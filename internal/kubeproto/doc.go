// Package kubeproto writes informerd's cached JSON of built-in Kubernetes
// objects in the protobuf wire form kube-apiserver sends for
// "Accept: application/vnd.kubernetes.protobuf" (get, list) and
// "application/vnd.kubernetes.protobuf;stream=watch" (watch), byte for byte.
//
// The unit is a message, the object's generated protobuf encoding without
// envelope (Message, PartialMessage). A response is built from messages:
//
//	Object     "k8s\x00" + runtime.Unknown{TypeMeta, Raw: message}
//	List       "k8s\x00" + runtime.Unknown{TypeMeta, Raw: list of ListMeta and messages}
//	WatchFrame 4-byte big-endian length + metav1.WatchEvent{Type, Object.Raw: Object(...)}
//	Status     Object of a metav1.Status, for errors and ERROR watch events
//
// so a list or a watch never decodes JSON again for an object it already
// encoded once.
//
// A message is transcoded from the JSON without the typed object
// (transcode.go); JSON or kinds the transcoder does not serve are decoded
// into the typed object and marshaled by the generated code. Both make the
// same bytes.
//
// Only kinds compiled into client-go's scheme have a protobuf encoding
// (Supports); custom resources do not, except their PartialObjectMetadata,
// which is built from the JSON "metadata" alone.
//
// Every function is pure and safe for concurrent use. What is kept between
// calls changes no result: each Go type's transcoding plan, made once,
// pooled buffers, and the messages of short custom JSON values (a
// quantity) in a bounded map. client-go's scheme, filled at init, is only
// read.
package kubeproto
