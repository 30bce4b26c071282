package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/informerd/informerd/internal/testenv"
)

// kubeAPIAddress is where `make run`'s informerd serves the Kubernetes API.
const kubeAPIAddress = "127.0.0.1:6443"

// writeInformerdKubeconfig writes a kubeconfig whose server is informerd's
// Kubernetes API, trusting the CA informerd publishes at caFile
// (--kube-api-tls-self-signed), with the token of a ServiceAccount "dev"
// bound to cluster-admin: kubectl's reads of what informerd caches come
// from its cache, everything else is forwarded with that token (a client
// certificate could not be forwarded).
func writeInformerdKubeconfig(ctx context.Context, env *testenv.Env, path, caFile string) error {
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dev"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("ServiceAccount default/dev: %w", err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dev", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind default/dev to cluster-admin: %w", err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "dev", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for default/dev: %w", err)
	}
	ca, err := filepath.Abs(caFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["informerd"] = &clientcmdapi.Cluster{Server: "https://" + kubeAPIAddress, CertificateAuthority: ca}
	cfg.AuthInfos["dev"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["informerd"] = &clientcmdapi.Context{Cluster: "informerd", AuthInfo: "dev", Namespace: "demo"}
	cfg.CurrentContext = "informerd"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
