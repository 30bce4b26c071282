package daemon

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/state"
)

// clusterUIDTimeout bounds the wait for the kube-system namespace at start:
// a saved state is served without the API server, so a start that cannot
// reach it goes on without the cluster's uid.
const clusterUIDTimeout = 2 * time.Second

// withClusterUID adds the uid of the cluster's kube-system namespace to
// id, the identity a saved state must match: a cluster rebuilt behind the
// same URL and CA has another. When the API server does not answer within
// clusterUIDTimeout, or refuses, id is returned as it is and the state is
// checked by URL and CA only; the integrity checks (--consistency-check-
// interval) then find a cache from another history.
func withClusterUID(ctx context.Context, id state.Identity, c *rest.Config, log *slog.Logger) state.Identity {
	ctx, cancel := context.WithTimeout(ctx, clusterUIDTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c))
	if err == nil {
		ns, gerr := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err = gerr; err == nil {
			id.Cluster = string(ns.UID)
			return id
		}
	}
	log.Warn("the cluster's identity (the kube-system namespace's uid) is unknown; a saved state is checked by the API server's URL and CA only", "err", err)
	return id
}
