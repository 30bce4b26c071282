package kubeapi

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachinerysharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/sharding"

	"github.com/informerd/informerd/internal/object"
)

// shard is a list's or watch's shardSelector (KEP-5866, alpha in v1.37 as
// ShardedListAndWatch, beta in 1.38): shardRange(object.metadata.uid or
// object.metadata.namespace, start, end) ranges of the FNV-1a hash of the
// field, joined by ||. Parsing and matching are k8s.io/apiserver's and
// k8s.io/apimachinery's own.
type shard struct {
	sel apimachinerysharding.Selector
}

// shardSelector parses expr, nil when it is empty; an invalid one is the
// API server's error (a 500 without a reason: its store returns a plain
// error).
func shardSelector(expr string) (*shard, error) {
	if expr == "" {
		return nil, nil
	}
	sel, err := sharding.Parse(expr)
	if err != nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Message: fmt.Sprintf("invalid shard selector: %v", err),
		}}
	}
	if sel.Empty() {
		return nil, nil
	}
	return &shard{sel: sel}, nil
}

// matches reports whether o's hashed field is in one of the ranges. The
// selector reads only the uid and the namespace.
func (s *shard) matches(o *object.Object) bool {
	ok, err := s.sel.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(o.UID), Namespace: o.Namespace}})
	return err == nil && ok
}

// info is the list's shardInfo: the selector as the API server echoes it.
func (s *shard) info() *metav1.ShardInfo {
	if s == nil {
		return nil
	}
	return &metav1.ShardInfo{Selector: s.sel.String()}
}
