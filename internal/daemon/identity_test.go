package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/state"
)

// TestClusterUID: the state's identity carries the kube-system namespace's
// uid when the API server answers, and is left as it is when it does not.
func TestClusterUID(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := state.Identity{Server: "https://cluster", CA: "ca"}
	ns, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := daemon.WithClusterUID(context.Background(), id, env.Config, quiet); got.Cluster != string(ns.UID) || got.Cluster == "" || got.Server != id.Server {
		t.Errorf("identity = %+v, want the kube-system uid %s", got, ns.UID)
	}
	if got := daemon.WithClusterUID(context.Background(), id, &rest.Config{Host: "http://127.0.0.1:1"}, quiet); got != id {
		t.Errorf("identity without an API server = %+v, want %+v", got, id)
	}
}
