package testenv_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/testenv"
)

// TestAPIServerAuditsAuditNamespace: kube-apiserver writes an event for a
// request in testenv.AuditNamespace as soon as it returned, and none for
// another namespace.
func TestAPIServerAuditsAuditNamespace(t *testing.T) {
	ctx := t.Context()
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const other = "testenv-not-audited"
	for _, ns := range []string{testenv.AuditNamespace, other} {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audit-probe"}}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// seen is what a test asserts on: the rest (IDs, times, addresses)
	// differs on each run.
	type seen struct {
		Level, Stage, Verb, User string
		Resource, Namespace      string
		Name                     string
		Code                     int32
	}
	var got []seen
	for _, ev := range testenv.ReadAuditEvents(t, env.AuditLog()) {
		if ev.ObjectRef == nil || ev.ObjectRef.Resource != "configmaps" || ev.ObjectRef.Name != "audit-probe" {
			continue
		}
		s := seen{
			Level: string(ev.Level), Stage: string(ev.Stage), Verb: ev.Verb, User: ev.User.Username,
			Resource: ev.ObjectRef.Resource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
		}
		if ev.ResponseStatus != nil {
			s.Code = ev.ResponseStatus.Code
		}
		got = append(got, s)
	}
	probe := func(verb string, code int32) seen {
		return seen{
			Level: string(auditv1.LevelMetadata), Stage: string(auditv1.StageResponseComplete), Verb: verb,
			User: "informerd-admin", Resource: "configmaps", Namespace: testenv.AuditNamespace, Name: "audit-probe", Code: code,
		}
	}
	// The create may have run in an earlier -count iteration; the get ran
	// now and is the last event.
	if len(got) == 0 {
		t.Fatalf("no audit event for configmaps/audit-probe in %s", env.AuditLog())
	}
	if diff := cmp.Diff(probe("get", 200), got[len(got)-1]); diff != "" {
		t.Errorf("last audit event for the probe (-want +got):\n%s", diff)
	}
	for _, s := range got {
		if s.Namespace != testenv.AuditNamespace {
			t.Errorf("audit event for namespace %s, which the policy does not audit: %+v", s.Namespace, s)
		}
	}
}

// TestNodeAuthorizer: kube-apiserver runs the Node authorizer, which
// reads field selectors: a kubelet may list the pods of its own node, not
// those of another node or all pods.
func TestNodeAuthorizer(t *testing.T) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	node, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		fieldSelector string
		wantForbidden bool
	}{
		{name: "own node", fieldSelector: "spec.nodeName=n1"},
		{name: "other node", fieldSelector: "spec.nodeName=n2", wantForbidden: true},
		{name: "all pods", wantForbidden: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := node.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: tc.fieldSelector})
			if got := apierrors.IsForbidden(err); got != tc.wantForbidden || (err != nil && !got) {
				t.Errorf("list pods with fieldSelector %q as system:node:n1: err = %v, want forbidden: %v", tc.fieldSelector, err, tc.wantForbidden)
			}
		})
	}
}
