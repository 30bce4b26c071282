package kubeapi

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// codecs encode the Status of the failures k8s.io/apiserver's filters
// write (a refused impersonation, a 403), negotiated by the request's
// Accept header as at the API server.
var codecs runtime.NegotiatedSerializer = serializer.NewCodecFactory(clientgoscheme.Scheme).WithoutConversion()
