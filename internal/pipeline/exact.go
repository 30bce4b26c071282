package pipeline

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/object"
)

var _ ExactLister = apiServer{}

// ListExact implements ExactLister: a paged list of the objects' metadata
// (PartialObjectMetadataList: no spec or status travels) with
// resourceVersionMatch=Exact, which the API server answers from its watch
// cache's snapshots where it keeps them, else from etcd.
func (a apiServer) ListExact(ctx context.Context, res Resolved, sel Selection, rv string, limit int64, pause time.Duration, page func([]KeyVersion) error) error {
	client := a.meta.Resource(res.GVR).Namespace(sel.Namespace)
	opts := metav1.ListOptions{
		ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: limit,
		LabelSelector: sel.LabelSelector, FieldSelector: sel.FieldSelector,
	}
	var kvs []KeyVersion
	for {
		l, err := client.List(ctx, opts)
		if err != nil {
			return err
		}
		kvs = kvs[:0]
		for i := range l.Items {
			m := &l.Items[i]
			kvs = append(kvs, KeyVersion{Key: object.KeyOf(m.Namespace, m.Name), ResourceVersion: m.ResourceVersion})
		}
		if err := page(kvs); err != nil {
			return err
		}
		if l.Continue == "" {
			return nil
		}
		// The continue token carries the resourceVersion.
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = l.Continue, "", ""
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}
