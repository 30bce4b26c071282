package client

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// NewInformerFunc returns a constructor with the signature of
// controller-runtime's cache.Options.NewInformer: each informer the cache
// creates lists and watches through informerd instead of the API server.
// The informerd resource of each object type is found by its group,
// version and kind (ListResources); o.Resource is ignored. The ListerWatcher
// controller-runtime passes in is not used, so the namespace and selectors
// of the controller-runtime cache do not apply: set them in o. o.Fields
// apply to every type the cache informs on, so give them only to a cache
// of one type (a path one type's schema lacks fails that type's lists).
//
// An object type informerd does not serve, or an example it cannot use,
// gives an informer whose lists fail with a message that says so, logged
// by client-go; the cache then never syncs.
func NewInformerFunc(c pb.CacheServiceClient, o Options) func(cache.ListerWatcher, runtime.Object, time.Duration, cache.Indexers) cache.SharedIndexInformer {
	o.Resource = ""
	return func(_ cache.ListerWatcher, example runtime.Object, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
		var lw cache.ListerWatcher
		lw, err := NewListWatch(c, example, o)
		if err != nil {
			klog.Background().Error(err, "informerd: cannot build an informer", "type", example)
			lw = failing{err}
		}
		return cache.NewSharedIndexInformer(lw, example, resync, indexers)
	}
}
