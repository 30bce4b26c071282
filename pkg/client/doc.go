// Package client connects Go programs to informerd.
//
// Dial opens a connection over TCP, TLS, mutual TLS or a Unix socket, with
// an optional bearer token read from a file that is read again when it
// rotates:
//
//	conn, err := client.Dial(client.Config{Address: "unix:///run/informerd/informerd.sock"})
//	cache := pb.NewCacheServiceClient(conn)
//
// ListWatch is a client-go cache.ListerWatcher backed by informerd, so an
// unmodified SharedIndexInformer runs on informerd instead of the API
// server:
//
//	lw, err := client.NewListWatch(cache, &corev1.Pod{}, client.Options{Resource: "pods", Index: "node", IndexValues: []string{node}})
//	informer := toolscache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, toolscache.Indexers{})
//
// Options.Fields is a field mask: the informer's store then holds only
// the fields asked for (plus apiVersion, kind and metadata's name,
// namespace, uid and resourceVersion), and a change to other fields calls
// no handler:
//
//	client.Options{Resource: "pods", Fields: []string{"metadata.labels", "status.podIP"}}
//
// NewInformerFunc plugs the same into a controller-runtime cache through
// its NewInformer option.
//
// Errors of informerd calls are *Error (FromError): the gRPC status and its
// ErrorInfo reason, which is also a Kubernetes API status, so apierrors'
// predicates and client-go's reflector handle them as they would the API
// server's. docs/clients.md has the whole picture.
package client
