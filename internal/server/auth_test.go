package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/server"
	"github.com/informerd/informerd/internal/testenv"
)

// TestKubernetesAuth runs --auth-mode=kubernetes against the real API
// server's TokenReview, SubjectAccessReview and RBAC: a ServiceAccount that
// may read configmaps in namespace a and nothing else.
func TestKubernetesAuth(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"authz-a", "authz-b"} {
		mustCreate(t, func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		})
		mustCreate(t, func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + ns}}, metav1.CreateOptions{})
			return err
		})
	}
	mustCreate(t, func() error {
		_, err := kube.CoreV1().Secrets("authz-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
		return err
	})
	sa, err := kube.CoreV1().ServiceAccounts("authz-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := kube.RbacV1().Roles("authz-a").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := kube.RbacV1().RoleBindings("authz-a").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "authz-a"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmap-reader"},
		}, metav1.CreateOptions{})
		return err
	})

	const ttl = 2 * time.Second
	k, err := auth.NewKubernetes(env.Config, auth.KubernetesOptions{AuthenticationTTL: ttl, AuthorizedTTL: ttl, UnauthorizedTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, `
resources:
  - resource: configmaps
  - resource: secrets
`, server.Options{Authenticator: k, Authorizer: k, RecheckInterval: 100 * time.Millisecond, WatchQueueLength: 100})
	for _, r := range []string{"configmaps", "secrets"} {
		p, _ := f.set.Lookup(r)
		testenv.Eventually(t, time.Minute, r+" to sync", func() bool { return p.Cache().Stats().Synced })
	}

	token := func(audience string) string {
		tr, err := kube.CoreV1().ServiceAccounts("authz-a").CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	good := token("informerd")
	as := func(tok string) context.Context {
		if tok == "" {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	list := func(tok, resource, ns string) ([]*pb.Object, error) {
		resp, err := f.client.List(as(tok), &pb.ListRequest{Resource: resource, Selector: &pb.Selector{Namespace: ns}})
		return resp.GetObjects(), err
	}

	tests := []struct {
		name     string
		call     func() error
		code     codes.Code
		contains string
	}{
		{"list configmaps in a", func() error {
			objs, err := list(good, "configmaps", "authz-a")
			if err == nil && (len(objs) != 1 || objs[0].GetName() != "cm-authz-a") {
				t.Errorf("got %v, want [cm-authz-a]", names(objs))
			}
			return err
		}, codes.OK, ""},
		{"get a configmap in a", func() error {
			_, err := f.client.Get(as(good), &pb.GetRequest{Resource: "configmaps", Namespace: "authz-a", Name: "cm-authz-a"})
			return err
		}, codes.OK, ""},
		{"list configmaps in b", func() error { _, err := list(good, "configmaps", "authz-b"); return err },
			codes.PermissionDenied, `cannot list resource "configmaps" in API group "" in namespace "authz-b"`},
		{"list configmaps in all namespaces", func() error { _, err := list(good, "configmaps", ""); return err },
			codes.PermissionDenied, "all namespaces"},
		{"get a secret in a", func() error {
			_, err := f.client.Get(as(good), &pb.GetRequest{Resource: "secrets", Namespace: "authz-a", Name: "s"})
			return err
		}, codes.PermissionDenied, `cannot get resource "secrets"`},
		{"watch configmaps in b", func() error {
			w, err := f.client.Watch(as(good), &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: "authz-b"}})
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}, codes.PermissionDenied, `cannot watch resource "configmaps"`},
		{"no token", func() error { _, err := list("", "configmaps", "authz-a"); return err },
			codes.Unauthenticated, "authorization: Bearer"},
		{"made-up token", func() error { _, err := list("not-a-token", "configmaps", "authz-a"); return err },
			codes.Unauthenticated, "TokenReview"},
		{"token for another audience", func() error { _, err := list(token("someone-else"), "configmaps", "authz-a"); return err },
			codes.Unauthenticated, "audience informerd"},
		{"forged token, valid (control for the expired one)", func() error {
			_, err := list(forge(t, sa, time.Now().Add(time.Hour)), "configmaps", "authz-a")
			return err
		}, codes.OK, ""},
		{"expired token", func() error {
			_, err := list(forge(t, sa, time.Now().Add(-time.Minute)), "configmaps", "authz-a")
			return err
		}, codes.Unauthenticated, "expired"},
		{"ListResources without a token", func() error { _, err := f.client.ListResources(ctx, &pb.ListResourcesRequest{}); return err },
			codes.Unauthenticated, "authorization: Bearer"},
		{"get a configmap in b by name", func() error {
			_, err := f.client.Get(as(good), &pb.GetRequest{Resource: "configmaps", Namespace: "authz-b", Name: "cm-authz-b"})
			return err
		}, codes.PermissionDenied, `cannot get resource "configmaps" (name "cm-authz-b")`},
		{"ListResources with a token", func() error { _, err := f.client.ListResources(as(good), &pb.ListResourcesRequest{}); return err },
			codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.contains) {
				t.Errorf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.contains)
			}
		})
	}

	t.Run("revoked permission ends an open watch", func(t *testing.T) {
		w, err := f.client.Watch(as(good), &pb.WatchRequest{Resource: "configmaps", Selector: &pb.Selector{Namespace: "authz-a"}, SendInitialEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := w.Recv()
			if err != nil {
				t.Fatalf("before revoking: %v", err)
			}
			if ev.GetType() == pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END {
				break
			}
		}
		if err := kube.RbacV1().RoleBindings("authz-a").Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		ended := make(chan error, 1)
		go func() {
			for {
				if _, err := w.Recv(); err != nil {
					ended <- err
					return
				}
			}
		}()
		// The cached "allowed" answer lives at most ttl; the watch re-checks
		// every 100ms. 10s of slack absorbs a slow machine, not the design.
		select {
		case err := <-ended:
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("watch ended with %v, want PermissionDenied", err)
			}
			t.Logf("watch ended %v after the RoleBinding was deleted (authorization cache TTL %v): %v", time.Since(revoked).Round(time.Millisecond), ttl, err)
		case <-time.After(ttl + 10*time.Second):
			t.Fatalf("watch still open %v after its RoleBinding was deleted", ttl+10*time.Second)
		}
	})
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// forge signs a ServiceAccount token for sa with the API server's own key,
// expiring at exp, as the API server's TokenRequest would.
func forge(t *testing.T, sa *corev1.ServiceAccount, exp time.Time) string {
	t.Helper()
	keyFile, issuer := env.ServiceAccountSigner()
	data, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key := k.(*ecdsa.PrivateKey)
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	claims := map[string]any{
		"iss": issuer,
		"sub": "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		"aud": []string{"informerd"},
		"iat": min(now.Unix(), exp.Add(-10*time.Minute).Unix()),
		"nbf": min(now.Unix(), exp.Add(-10*time.Minute).Unix()),
		"exp": exp.Unix(),
		"kubernetes.io": map[string]any{
			"namespace":      sa.Namespace,
			"serviceaccount": map[string]string{"name": sa.Name, "uid": string(sa.UID)},
		},
	}
	signed := enc(map[string]string{"alg": "ES256", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}
