package kubeapi

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/shard"
)

// shardSelector parses a list's or watch's shardSelector (KEP-5866), nil
// when it is empty; an invalid one is the API server's error (a 500
// without a reason: its store returns a plain error).
func shardSelector(expr string) (*shard.Selector, error) {
	sel, err := shard.Parse(expr)
	if err != nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Message: fmt.Sprintf("invalid shard selector: %v", err),
		}}
	}
	return sel, nil
}

// shardInfo is a sharded list's shardInfo: the selector as the API server
// echoes it; nil when the list is not sharded.
func shardInfo(s *shard.Selector) *metav1.ShardInfo {
	if s == nil {
		return nil
	}
	return &metav1.ShardInfo{Selector: s.String()}
}
