package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/testenv"
	"github.com/informerd/informerd/pkg/client"
)

// TestNodeTier runs the two tiers of deploy/examples/tiered against the
// real API server: a root with --node-bound-service-accounts naming the
// leaves' ServiceAccount, and a leaf that presents its pod's token
// (--upstream-token-file), takes its node's pods from the root and serves
// them on a Unix socket with --unix-socket-allowed-uids. The leaf holds
// exactly the pods the API server lists on its node; on the root's
// Kubernetes API the same token lists with the field selector of its node
// and is refused every pod.
func TestNodeTier(t *testing.T) {
	ctx := context.Background()
	const ns = "nodetier"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	for _, node := range []string{"nt-n1", "nt-n2"} {
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		must(err)
		t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	}
	for _, sa := range []string{"informerd-leaf", "app"} {
		_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
	}
	// deploy/examples/tiered/node/rbac.yaml, for the root's review.
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "nodetier-leaf"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}},
	}, metav1.CreateOptions{})
	must(err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nodetier-leaf"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "informerd-leaf", Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodetier-leaf"},
	}, metav1.CreateOptions{})
	must(err)
	pod := func(name, node, sa string) *corev1.Pod {
		p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}, metav1.CreateOptions{})
		must(err)
		return p
	}
	pod("w1", "nt-n1", "app")
	pod("w2", "nt-n2", "app")
	leafPod := pod("informerd-leaf-nt-n1", "nt-n1", "informerd-leaf")
	// What the kubelet writes into the leaf pod's projected volume.
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "informerd-leaf", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:      []string{"informerd"},
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: leafPod.Name, UID: leafPod.UID},
	}}, metav1.CreateOptions{})
	must(err)
	onNode, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=nt-n1"})
	must(err)
	var want []string
	for _, p := range onNode.Items {
		want = append(want, p.Name)
	}
	slices.Sort(want)

	ro := daemon.NewOptions()
	ro.RestConfig = env.Config
	ro.Config = parse(t, fmt.Sprintf("resources:\n  - resource: pods\n    namespace: %s\n    indexes: [{name: node, jsonpath: \"{.spec.nodeName}\"}]\n", ns))
	ro.GRPCAddress, ro.MetricsAddress, ro.KubeAPIAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	ro.AuthMode = "kubernetes"
	ro.NodeBoundServiceAccounts = ns + ":informerd-leaf"
	ro.ShutdownTimeout = 5 * time.Second
	root, _ := start(t, ro)

	dir := t.TempDir()
	lo := daemon.NewOptions()
	lo.Config = parse(t, "resources:\n  - resource: pods\n    indexes: [{name: node, jsonpath: \"{.spec.nodeName}\"}]\n    upstreamSelector: {index: {name: node, values: [nt-n1]}}\n")
	lo.Upstream = client.Config{Address: root.GRPCAddr(), TokenFile: testenv.WriteFile(t, dir, "token", []byte(tr.Status.Token))}
	lo.GRPCAddress, lo.MetricsAddress = "unix://"+filepath.Join(dir, "leaf.sock"), "127.0.0.1:0"
	lo.UnixSocketAllowedUIDs = strconv.Itoa(os.Getuid())
	lo.ShutdownTimeout = 5 * time.Second
	leaf, _ := start(t, lo)

	conn, err := client.Dial(client.Config{Address: "unix://" + leaf.GRPCAddr()})
	must(err)
	defer conn.Close()
	cache := pb.NewCacheServiceClient(conn)
	var got []string
	testenv.Eventually(t, time.Minute, "the leaf to hold its node's pods", func() bool {
		l, err := cache.List(ctx, &pb.ListRequest{Resource: "pods"})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, o := range l.GetObjects() {
			got = append(got, o.GetName())
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})

	resp, err := http.Get(leaf.MetricsURL() + "/metrics")
	must(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := `informerd_unix_socket_refused_total{listener="grpc",reason="uid"} 0`; !strings.Contains(string(body), m) {
		t.Errorf("the leaf's /metrics has no %s", m)
	}

	// The root's Kubernetes API: the same rule, by field selector.
	leafAPI := kubernetes.NewForConfigOrDie(&rest.Config{Host: root.KubeAPIURL(), BearerToken: tr.Status.Token})
	l, err := leafAPI.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=nt-n1"})
	must(err)
	got = got[:0]
	for _, p := range l.Items {
		got = append(got, p.Name)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Kubernetes API's list of nt-n1 (-API server +informerd):\n%s", diff)
	}
	for name, opts := range map[string]metav1.ListOptions{
		"every pod":         {},
		"another node":      {FieldSelector: "spec.nodeName=nt-n2"},
		"by label selector": {LabelSelector: "app=web"},
	} {
		_, err := leafAPI.CoreV1().Pods(ns).List(ctx, opts)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `bound to node "nt-n1"`) {
			t.Errorf("%s: %v, want 403 Forbidden saying it is bound to nt-n1", name, err)
		}
	}
	if _, err := leafAPI.CoreV1().Pods(ns).Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get of a pod of its node: %v, want 403 Forbidden", err)
	}
}

// TestNodeTierFlags: the flags of a node tier are refused at start with a
// reason when they cannot work.
func TestNodeTierFlags(t *testing.T) {
	base := daemon.NewOptions()
	base.Config = parse(t, "resources:\n  - resource: pods\n    indexes: [{name: node, jsonpath: \"{.spec.nodeName}\"}]\n  - resource: configmaps\n")
	base.AuthMode = "kubernetes"
	tests := []struct {
		name   string
		change func(*daemon.Options)
		want   string // "" for accepted
	}{
		{"node-bound", func(o *daemon.Options) { o.NodeBoundServiceAccounts = "informerd:informerd-leaf,other:leaf" }, ""},
		{"node-bound without kubernetes auth", func(o *daemon.Options) {
			o.NodeBoundServiceAccounts, o.AuthMode, o.GRPCAddress = "informerd:informerd-leaf", "none", "unix:///tmp/s.sock"
		}, "needs --auth-mode=kubernetes"},
		{"node-bound, a user name", func(o *daemon.Options) { o.NodeBoundServiceAccounts = "system:serviceaccount:informerd:leaf" }, "--node-bound-service-accounts"},
		{"node-bound, pods without a node index", func(o *daemon.Options) {
			o.NodeBoundServiceAccounts = "informerd:informerd-leaf"
			o.Config = parse(t, "resources:\n  - resource: pods\n")
		}, "resource pods has no index"},
		{"allowed uids on a socket", func(o *daemon.Options) { o.UnixSocketAllowedUIDs, o.GRPCAddress = "1000,65532", "unix:///tmp/s.sock" }, ""},
		{"allowed uids on TCP", func(o *daemon.Options) { o.UnixSocketAllowedUIDs = "1000" }, "unix:///path"},
		{"allowed uids by name", func(o *daemon.Options) { o.UnixSocketAllowedUIDs, o.GRPCAddress = "nobody", "unix:///tmp/s.sock" }, "--unix-socket-allowed-uids"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
