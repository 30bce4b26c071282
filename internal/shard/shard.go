// Package shard selects cached objects by a KEP-5866 shard selector:
// shardRange(object.metadata.uid or object.metadata.namespace, start, end)
// ranges of the FNV-1a 64-bit hash of the field, joined by ||. It is the
// same selector on the Kubernetes API (?shardSelector=, alpha in v1.37 as
// ShardedListAndWatch, beta in 1.38) and on gRPC (Selector.shard_selector).
// Parsing and matching are k8s.io/apiserver's and k8s.io/apimachinery's own:
// this package only adapts a cached object to them.
package shard

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	apiserversharding "k8s.io/apiserver/pkg/sharding"

	"github.com/informerd/informerd/internal/object"
)

// Selector is a parsed shard selector. It is immutable and safe for
// concurrent use.
type Selector struct {
	sel sharding.Selector
}

// Parse parses expr; nil for an empty one (every object).
func Parse(expr string) (*Selector, error) {
	if expr == "" {
		return nil, nil
	}
	sel, err := apiserversharding.Parse(expr)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, nil
	}
	return &Selector{sel: sel}, nil
}

// Matches reports whether o's hashed field is in one of the ranges. The
// selector reads only the uid and the namespace.
func (s *Selector) Matches(o *object.Object) bool {
	ok, err := s.sel.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(o.UID), Namespace: o.Namespace}})
	return err == nil && ok
}

// String is the selector as the API server echoes it in a list's
// shardInfo.
func (s *Selector) String() string { return s.sel.String() }
