package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kfields "k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// nodeTier is a namespace of pods on two nodes, the ServiceAccounts that
// read them, and tokens bound to pods, made on the real API server.
type nodeTier struct {
	kube *kubernetes.Clientset
	ns   string
}

func (n nodeTier) create(t *testing.T, create func(ctx context.Context) error) {
	t.Helper()
	if err := create(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// pod creates pod name on node, run by ServiceAccount sa.
func (n nodeTier) pod(t *testing.T, name, node, sa string) *corev1.Pod {
	t.Helper()
	p, err := n.kube.CoreV1().Pods(n.ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// token is a token of sa for the audience informerd, bound to pod when it
// is set: what a projected serviceAccountToken volume of pod holds, the
// node's name and uid in it (KEP-4193), as the kubelet would get it.
func (n nodeTier) token(t *testing.T, sa string, pod *corev1.Pod) string {
	t.Helper()
	spec := authenticationv1.TokenRequestSpec{Audiences: []string{"informerd"}, ExpirationSeconds: ptr.To[int64](600)}
	if pod != nil {
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := n.kube.CoreV1().ServiceAccounts(n.ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// nodeBoundConfig is the root's: pods with the node index, and configmaps.
const nodeBoundConfig = `
resources:
  - resource: pods
    namespace: nodebound
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
      - {name: app, label: app}
  - resource: configmaps
    namespace: nodebound
`

// TestNodeBound runs --node-bound-service-accounts against the real API
// server: a leaf's pod-bound token carries its node, and the leaf reads
// its node's pods, exactly those the API server lists for the field
// selector spec.nodeName, and nothing wider; without a node in its token
// it reads nothing; another ServiceAccount with the same RBAC is not
// bound; the SubjectAccessReview still decides.
func TestNodeBound(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(env.Config)
	n := nodeTier{kube: kube, ns: "nodebound"}
	n.create(t, func(ctx context.Context) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{})
		return err
	})
	// Two nodes that exist; the node in a token has a uid only then.
	for _, node := range []string{"nb-n1", "nb-n2"} {
		n.create(t, func(ctx context.Context) error {
			_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
			return err
		})
		t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	}
	for _, sa := range []string{"leaf", "leaf-no-rbac", "other"} {
		n.create(t, func(ctx context.Context) error {
			_, err := kube.CoreV1().ServiceAccounts(n.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
	}
	// RBAC as deploy/examples/tiered/node: list and watch pods; and
	// configmaps in the namespace, a resource with no node.
	n.create(t, func(ctx context.Context) error {
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "nodebound-pods"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"list", "watch"}}},
		}, metav1.CreateOptions{})
		return err
	})
	n.create(t, func(ctx context.Context) error {
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "nodebound-pods"},
			Subjects: []rbacv1.Subject{
				{Kind: "ServiceAccount", Name: "leaf", Namespace: n.ns},
				{Kind: "ServiceAccount", Name: "other", Namespace: n.ns},
			},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodebound-pods"},
		}, metav1.CreateOptions{})
		return err
	})
	n.create(t, func(ctx context.Context) error {
		_, err := kube.CoreV1().ConfigMaps(n.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
		return err
	})
	for name, node := range map[string]string{"a1": "nb-n1", "a2": "nb-n1", "b1": "nb-n2", "pending": ""} {
		n.pod(t, name, node, "other")
	}
	leafPod := n.pod(t, "leaf-nb-n1", "nb-n1", "leaf")
	noRBACPod := n.pod(t, "leaf-no-rbac-nb-n1", "nb-n1", "leaf-no-rbac")
	// A pod bound to a node that does not exist: its token names the node
	// but has no node uid.
	ghostPod := n.pod(t, "leaf-ghost", "nb-ghost", "leaf")

	cfg, err := config.Parse([]byte(nodeBoundConfig))
	if err != nil {
		t.Fatal(err)
	}
	bound := []auth.ServiceAccount{{Namespace: n.ns, Name: "leaf"}, {Namespace: n.ns, Name: "leaf-no-rbac"}}
	k, err := auth.NewKubernetes(env.Config, auth.KubernetesOptions{NodeBinding: auth.NewNodeBinding(bound, cfg.Resources)})
	if err != nil {
		t.Fatal(err)
	}
	f := serveSet(t, runCaches(t, nodeBoundConfig), server.Options{Authenticator: k, Authorizer: k, RecheckInterval: 100 * time.Millisecond, WatchQueueLength: 100})
	pods, _ := f.set.Lookup("pods")
	testenv.Eventually(t, time.Minute, "the pods cache to hold the 7 pods", func() bool { return pods.Cache().Stats().Objects == 7 })
	cms, _ := f.set.Lookup("configmaps")
	testenv.Eventually(t, time.Minute, "configmaps to sync", func() bool { return cms.Cache().Stats().Synced })

	// What the API server itself lists of each node.
	apiServer := func(node string) []string {
		l, err := kube.CoreV1().Pods(n.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return names
	}
	if got := apiServer("nb-n1"); len(got) != 4 {
		t.Fatalf("the API server lists %v on nb-n1, want 4 pods", got)
	}

	leaf := n.token(t, "leaf", leafPod)
	unbound := n.token(t, "leaf", nil)
	ghost := n.token(t, "leaf", ghostPod)
	noRBAC := n.token(t, "leaf-no-rbac", noRBACPod)
	other := n.token(t, "other", nil)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
	}
	onNode := func(values ...string) *pb.Selector {
		return &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: values}}
	}
	list := func(tok, resource string, sel *pb.Selector) ([]string, error) {
		resp, err := f.client.List(as(tok), &pb.ListRequest{Resource: resource, Selector: sel, Limit: 100})
		got := names(resp.GetObjects())
		slices.Sort(got)
		return got, err
	}
	// watch returns the initial objects of a Watch, or the error it ended
	// with.
	watch := func(tok string, sel *pb.Selector) ([]string, error) {
		ctx, cancel := context.WithCancel(as(tok))
		defer cancel()
		w, err := f.client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: sel, SendInitialEvents: true})
		if err != nil {
			return nil, err
		}
		var got []string
		for {
			ev, err := w.Recv()
			if err != nil {
				return nil, err
			}
			if ev.GetType() == pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END {
				slices.Sort(got)
				return got, nil
			}
			got = append(got, ev.GetObject().GetName())
		}
	}
	const allowed = `may only list and watch the pods of that node, selected by index "node" with the one value "nb-n1", or by field selector spec.nodeName=nb-n1`
	tests := []struct {
		name string
		call func() ([]string, error)
		// want are the objects read when allowed; code and reason the
		// refusal otherwise.
		want   []string
		code   codes.Code
		reason string
	}{
		{name: "list its node's pods by index", call: func() ([]string, error) { return list(leaf, "pods", onNode("nb-n1")) }, want: apiServer("nb-n1")},
		{name: "list its node's pods in the namespace", call: func() ([]string, error) {
			sel := onNode("nb-n1")
			sel.Namespace = n.ns
			return list(leaf, "pods", sel)
		}, want: apiServer("nb-n1")},
		{name: "watch its node's pods by index", call: func() ([]string, error) { return watch(leaf, onNode("nb-n1")) }, want: apiServer("nb-n1")},
		{name: "list configmaps, not node-scoped", call: func() ([]string, error) { return list(leaf, "configmaps", nil) }, want: []string{"cm"}},
		{name: "list every pod", call: func() ([]string, error) { return list(leaf, "pods", nil) }, code: codes.PermissionDenied, reason: allowed},
		{name: "list the namespace's pods", call: func() ([]string, error) { return list(leaf, "pods", &pb.Selector{Namespace: n.ns}) }, code: codes.PermissionDenied, reason: allowed},
		{name: "list another node's pods", call: func() ([]string, error) { return list(leaf, "pods", onNode("nb-n2")) }, code: codes.PermissionDenied, reason: allowed},
		{name: "list its node's and another's", call: func() ([]string, error) { return list(leaf, "pods", onNode("nb-n1", "nb-n2")) }, code: codes.PermissionDenied, reason: allowed},
		{name: "list by the app index", call: func() ([]string, error) {
			return list(leaf, "pods", &pb.Selector{Index: &pb.IndexSelector{Name: "app", Values: []string{"nb-n1"}}})
		}, code: codes.PermissionDenied, reason: allowed},
		{name: "watch every pod", call: func() ([]string, error) { return watch(leaf, nil) }, code: codes.PermissionDenied, reason: allowed},
		{name: "watch another node's pods", call: func() ([]string, error) { return watch(leaf, onNode("nb-n2")) }, code: codes.PermissionDenied, reason: allowed},
		{name: "get a pod of its node", call: func() ([]string, error) {
			_, err := f.client.Get(as(leaf), &pb.GetRequest{Resource: "pods", Namespace: n.ns, Name: "a1"})
			return nil, err
		}, code: codes.PermissionDenied, reason: allowed},
		{name: "a token of the ServiceAccount alone", call: func() ([]string, error) { return list(unbound, "pods", onNode("nb-n1")) },
			code: codes.PermissionDenied, reason: "its token names no node"},
		{name: "a token of the ServiceAccount alone, configmaps", call: func() ([]string, error) { return list(unbound, "configmaps", nil) },
			code: codes.PermissionDenied, reason: "its token names no node"},
		{name: "a pod on a node that does not exist", call: func() ([]string, error) { return list(ghost, "pods", onNode("nb-ghost")) },
			code: codes.PermissionDenied, reason: "its token names no node"},
		{name: "bound, on its node, without RBAC", call: func() ([]string, error) { return list(noRBAC, "pods", onNode("nb-n1")) },
			code: codes.PermissionDenied, reason: `cannot list resource "pods"`},
		{name: "another ServiceAccount lists every pod", call: func() ([]string, error) { return list(other, "pods", nil) },
			want: []string{"a1", "a2", "b1", "leaf-ghost", "leaf-nb-n1", "leaf-no-rbac-nb-n1", "pending"}},
		{name: "another ServiceAccount watches another node", call: func() ([]string, error) { return watch(other, onNode("nb-n2")) }, want: []string{"b1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.reason) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.reason)
			}
			if diff := cmp.Diff(tc.want, got); tc.code == codes.OK && diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}

	// The field selector's form (the Kubernetes API layer's), through the
	// same authenticator and authorizer: the API server's TokenReview and
	// SubjectAccessReview, the selector in the review.
	t.Run("field selector", func(t *testing.T) {
		u, err := k.Authenticate(metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+leaf)))
		if err != nil {
			t.Fatal(err)
		}
		read := func(selector string) error {
			sel, err := kfields.ParseSelector(selector)
			if err != nil {
				t.Fatal(err)
			}
			return k.Authorize(t.Context(), u, auth.Attributes{Verb: "watch", Version: "v1", Resource: "pods", Configured: "pods", FieldSelector: sel.Requirements()})
		}
		if err := read("spec.nodeName=nb-n1"); err != nil {
			t.Errorf("spec.nodeName=nb-n1: %v", err)
		}
		for _, s := range []string{"spec.nodeName=nb-n2", "spec.nodeName!=nb-n2", "metadata.name=a1"} {
			var e *auth.Error
			if err := read(s); !errors.As(err, &e) || e.Kind != auth.Forbidden || !strings.Contains(e.Reason, allowed) {
				t.Errorf("%s: got %v, want Forbidden saying what is allowed", s, err)
			}
		}
	})
}
