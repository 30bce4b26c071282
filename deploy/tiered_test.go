package deploy_test

import (
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
	"github.com/informerd/informerd/internal/transport"
)

// tiered is the rendered deploy/examples/tiered, by part.
type tiered struct {
	root, app           appsv1.Deployment
	leaf                appsv1.DaemonSet
	service             corev1.Service // the headless one the leaves dial
	pdb                 policyv1.PodDisruptionBudget
	rootConfig, leafCfg string
}

func renderTiered(t *testing.T) tiered {
	t.Helper()
	var tr tiered
	into := func(o *unstructured.Unstructured, v any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range render(t, "examples/tiered") {
		data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		switch {
		case o.GetKind() == "Deployment" && o.GetNamespace() == "informerd":
			into(o, &tr.root)
		case o.GetKind() == "Deployment":
			into(o, &tr.app)
		case o.GetKind() == "DaemonSet":
			into(o, &tr.leaf)
		case o.GetKind() == "Service" && o.GetName() == "informerd-root":
			into(o, &tr.service)
		case o.GetKind() == "PodDisruptionBudget":
			into(o, &tr.pdb)
		case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "informerd-leaf-config-"):
			tr.leafCfg = data
		case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "informerd-config-"):
			tr.rootConfig = data
		}
	}
	if tr.root.Name == "" || tr.app.Name == "" || tr.leaf.Name == "" || tr.service.Name == "" || tr.pdb.Name == "" || tr.rootConfig == "" || tr.leafCfg == "" {
		t.Fatal("want the root and app Deployments, the leaf DaemonSet, the Service informerd-root, a PodDisruptionBudget and both configs")
	}
	return tr
}

// TestTiered checks what the dry run cannot see in deploy/examples/tiered:
// the leaf accepts its flags with its config, dials the headless Service of
// the root replicas with a token the root accepts, selects by an index the
// root has, and serves a socket the app reaches on the same node.
func TestTiered(t *testing.T) {
	tr := renderTiered(t)
	leaf, ok := informerdContainer(tr.leaf.Spec.Template.Spec)
	if !ok {
		t.Fatal("no informerd container in the leaf DaemonSet")
	}
	root, ok := informerdContainer(tr.root.Spec.Template.Spec)
	if !ok {
		t.Fatal("no informerd container in the root Deployment")
	}

	// NODE_NAME, which the leaf's config expands, comes from the pod's node.
	i := slices.IndexFunc(leaf.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" })
	if i < 0 || leaf.Env[i].ValueFrom == nil || leaf.Env[i].ValueFrom.FieldRef == nil || leaf.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("the leaf's NODE_NAME is not set from the downward API's spec.nodeName: %+v", leaf.Env)
	}
	t.Setenv("NODE_NAME", "node-1")
	lo, leafCfg := validOptions(t, "the leaf", leaf.Args, tr.leafCfg)
	ro, rootCfg := validOptions(t, "the root", root.Args, tr.rootConfig)

	t.Run("upstream", func(t *testing.T) {
		host, port, err := net.SplitHostPort(lo.Upstream.Address)
		if err != nil {
			t.Fatalf("--upstream-informerd=%s: want the headless Service's host:port", lo.Upstream.Address)
		}
		svc := tr.service
		if want := svc.Name + "." + svc.Namespace + ".svc"; host != want && host != want+".cluster.local" {
			t.Errorf("the leaf dials %s, not the Service %s", host, want)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s has clusterIP %q: want None, so that its name resolves to every replica", svc.Name, svc.Spec.ClusterIP)
		}
		if !selects(svc.Spec.Selector, tr.root.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v; the root's pods have labels %v", svc.Name, svc.Spec.Selector, tr.root.Spec.Template.Labels)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return strconv.Itoa(int(p.Port)) == port && slices.ContainsFunc(root.Ports, func(c corev1.ContainerPort) bool {
				return c.Name == p.TargetPort.String() && strings.HasSuffix(ro.GRPCAddress, ":"+strconv.Itoa(int(c.ContainerPort)))
			})
		}) {
			t.Errorf("port %s of Service %s does not lead to the root's --grpc-address %s", port, svc.Name, ro.GRPCAddress)
		}
	})

	t.Run("auth", func(t *testing.T) {
		if ro.AuthMode != auth.ModeKubernetes || lo.Upstream.TokenFile == "" || lo.Upstream.CAFile == "" {
			t.Fatalf("want the root with --auth-mode=kubernetes (got %q) and the leaf with --upstream-token-file and --upstream-ca-file", ro.AuthMode)
		}
		source := func(file string) *corev1.VolumeProjection {
			for _, m := range leaf.VolumeMounts {
				if path.Dir(file) != m.MountPath {
					continue
				}
				for _, v := range tr.leaf.Spec.Template.Spec.Volumes {
					if v.Name != m.Name || v.Projected == nil {
						continue
					}
					for i, s := range v.Projected.Sources {
						if (s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == path.Base(file)) ||
							(s.Secret != nil && slices.ContainsFunc(s.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == path.Base(file) })) {
							return &v.Projected.Sources[i]
						}
					}
				}
			}
			return nil
		}
		token := source(lo.Upstream.TokenFile)
		if token == nil || token.ServiceAccountToken == nil || !slices.Contains(strings.Split(ro.TokenAudiences, ","), token.ServiceAccountToken.Audience) {
			t.Errorf("--upstream-token-file=%s is not a projected ServiceAccount token for an audience the root accepts (%s)", lo.Upstream.TokenFile, ro.TokenAudiences)
		}
		ca := source(lo.Upstream.CAFile)
		var tlsSecret string
		for _, v := range tr.root.Spec.Template.Spec.Volumes {
			if v.Secret != nil && slices.ContainsFunc(root.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == v.Name && path.Dir(ro.TLS.CertFile) == m.MountPath
			}) {
				tlsSecret = v.Secret.SecretName
			}
		}
		if ca == nil || ca.Secret == nil || ca.Secret.Name != tlsSecret {
			t.Errorf("--upstream-ca-file=%s is not the ca.crt of the root's certificate Secret %q", lo.Upstream.CAFile, tlsSecret)
		}
		// The root confines the leaves' ServiceAccount to their node.
		bound, err := auth.ParseServiceAccounts(ro.NodeBoundServiceAccounts)
		if err != nil {
			t.Fatal(err)
		}
		sa := auth.ServiceAccount{Namespace: tr.leaf.Namespace, Name: tr.leaf.Spec.Template.Spec.ServiceAccountName}
		if !slices.Contains(bound, sa) {
			t.Errorf("the root's --node-bound-service-accounts=%s does not name the leaves' ServiceAccount %s", ro.NodeBoundServiceAccounts, sa)
		}
	})

	t.Run("selector", func(t *testing.T) {
		for _, r := range leafCfg.Resources {
			u := r.UpstreamSelector
			if u == nil || u.Index == nil {
				t.Errorf("resource %s: want an upstreamSelector by index, so that a leaf takes its node's part", r.Resource)
				continue
			}
			if !slices.Equal(u.Index.Values, []string{"node-1"}) {
				t.Errorf("resource %s: upstreamSelector.index.values %v, want [${NODE_NAME}]", r.Resource, u.Index.Values)
			}
			i := slices.IndexFunc(rootCfg.Resources, func(rr config.Resource) bool { return rr.Resource == r.Resource })
			if i < 0 || !slices.ContainsFunc(rootCfg.Resources[i].Indexes, func(x config.Index) bool { return x.Name == u.Index.Name }) {
				t.Errorf("resource %s: the leaf selects by index %q, which the root's config does not define", r.Resource, u.Index.Name)
			}
		}
	})

	t.Run("socket", func(t *testing.T) {
		dir := func(pod corev1.PodSpec, c corev1.Container, address string) string {
			p, ok := strings.CutPrefix(address, "unix://")
			if !ok {
				t.Fatalf("%s: want a unix:// address", address)
			}
			for _, m := range c.VolumeMounts {
				if path.Dir(p) == m.MountPath {
					for _, v := range pod.Volumes {
						if v.Name == m.Name && v.HostPath != nil {
							return v.HostPath.Path
						}
					}
				}
			}
			return ""
		}
		served := dir(tr.leaf.Spec.Template.Spec, leaf, lo.GRPCAddress)
		if served == "" || lo.AuthMode != auth.ModeNone {
			t.Fatalf("the leaf serves %s (--auth-mode=%s): want a socket in a hostPath directory, with --auth-mode none", lo.GRPCAddress, lo.AuthMode)
		}
		app := tr.app.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(app.Env, func(e corev1.EnvVar) bool { return e.Name == "INFORMERD_ADDRESS" })
		if i < 0 {
			t.Fatal("the app has no INFORMERD_ADDRESS")
		}
		if got := dir(tr.app.Spec.Template.Spec, app, app.Env[i].Value); got != served || path.Base(app.Env[i].Value) != path.Base(lo.GRPCAddress) {
			t.Errorf("the app reads %s in the node's %q; the leaf serves %s in %q", app.Env[i].Value, got, lo.GRPCAddress, served)
		}
		// The leaf admits the app's user, and not every user.
		allowed, err := transport.ParseUIDs(lo.UnixSocketAllowedUIDs)
		if err != nil {
			t.Fatal(err)
		}
		sc := tr.app.Spec.Template.Spec.SecurityContext
		if sc == nil || sc.RunAsUser == nil || len(allowed) == 0 || !slices.Contains(allowed, uint32(*sc.RunAsUser)) {
			t.Errorf("the leaf's --unix-socket-allowed-uids=%q does not admit the app's user (securityContext %+v)", lo.UnixSocketAllowedUIDs, sc)
		}
	})

	t.Run("disruption", func(t *testing.T) {
		pdb := tr.pdb.Spec
		if pdb.Selector == nil || !selects(pdb.Selector.MatchLabels, tr.root.Spec.Template.Labels) {
			t.Errorf("the PodDisruptionBudget selects %v; the root's pods have labels %v", pdb.Selector, tr.root.Spec.Template.Labels)
		}
		if pdb.MinAvailable == nil || tr.root.Spec.Replicas == nil || pdb.MinAvailable.IntValue() < 1 || pdb.MinAvailable.IntValue() >= int(*tr.root.Spec.Replicas) {
			t.Errorf("minAvailable %v with %v root replicas: want at least 1 kept and 1 that may go", pdb.MinAvailable, tr.root.Spec.Replicas)
		}
	})
}

// validOptions parses who's args and config, and checks that informerd
// accepts them together.
func validOptions(t *testing.T, who string, args []string, data string) (daemon.Options, *config.Config) {
	t.Helper()
	o := parseArgs(t, args)
	c, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("%s's config: %v", who, err)
	}
	o.Config = c
	if err := o.Validate(); err != nil {
		t.Errorf("%s refuses its args: %v", who, err)
	}
	return o, c
}
