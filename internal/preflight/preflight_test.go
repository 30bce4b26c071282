package preflight_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/preflight"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func check(t *testing.T, cfg *rest.Config, yaml string) (string, bool) {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	results, err := preflight.Check(context.Background(), c, mapper, kubernetes.NewForConfigOrDie(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	ok := preflight.Write(&b, results)
	return b.String(), ok
}

func TestPreflight(t *testing.T) {
	nobody, err := env.UserConfig("nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    *rest.Config
		yaml   string
		wantOK bool
		want   []string
	}{
		{"admin may read what exists", env.Config, "resources: [{resource: pods}, {resource: deployments.apps, namespace: default}]", true,
			[]string{"ok    pods (/v1, Resource=pods, Pod)", "ok    deployments.apps (apps/v1, Resource=deployments, Deployment)"}},
		{"a missing CRD", env.Config, "resources: [{resource: widgets.v1.example.com}]", false,
			[]string{"FAIL  widgets.v1.example.com: the API server does not serve it"}},
		{"namespace on a cluster-scoped resource", env.Config, "resources: [{resource: nodes, namespace: default}]", false,
			[]string{"cluster-scoped: remove it"}},
		{"a user without RBAC", nobody, "resources: [{resource: configmaps, namespace: default}]", false,
			[]string{"FAIL  configmaps: forbidden to list configmaps in namespace default", "forbidden to watch configmaps"}},
		{"cluster-wide needs cluster-wide permission", nobody, "resources: [{resource: secrets}]", false,
			[]string{"forbidden to list secrets in all namespaces (a ClusterRole bound with a ClusterRoleBinding)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report, ok := check(t, tt.cfg, tt.yaml)
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v; report:\n%s", ok, tt.wantOK, report)
			}
			for _, w := range tt.want {
				if !strings.Contains(report, w) {
					t.Errorf("report does not contain %q:\n%s", w, report)
				}
			}
		})
	}
}
