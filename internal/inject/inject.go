// Package inject adds informerd to a Pod as a native sidecar, so that an
// unmodified app in it reads the Kubernetes API from informerd's cache: the
// mutating admission webhook of cmd/informerd-inject.
//
// A Pod is injected when its namespace is labelled informerd.io/inject=enabled
// or it is annotated informerd.io/inject: "true", unless it is annotated
// informerd.io/inject: "false". Injection adds:
//
//   - informerd as an init container with restartPolicy Always (a native
//     sidecar: it starts first, and the app starts once its startup probe
//     passes), its configuration from the ConfigMap the informerd.io/config
//     annotation names (default informerd-sidecar), serving the Kubernetes
//     API on 127.0.0.1 with a certificate it issues itself
//     (--kube-api-tls-self-signed), its state in an emptyDir;
//   - on every other container, KUBERNETES_SERVICE_HOST=127.0.0.1 and
//     KUBERNETES_SERVICE_PORT set to informerd's port, and the service
//     account folder replaced by one whose ca.crt is informerd's CA, so
//     rest.InClusterConfig(), load_incluster_config() and loadFromCluster()
//     reach informerd without a code change.
//
// Injection never refuses a Pod: one it cannot inject (a bad annotation, a
// missing ConfigMap) is admitted unchanged, with a warning in the admission
// response and an Event that says why.
package inject

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Names on Pods and Namespaces.
const (
	// AnnotationInject is "true" to inject a Pod, "false" to keep it out.
	AnnotationInject = "informerd.io/inject"
	// AnnotationConfig names the ConfigMap (key config.yaml) of the Pod's
	// informerd.
	AnnotationConfig = "informerd.io/config"
	// LabelNamespace set to "enabled" on a Namespace injects its Pods.
	LabelNamespace = "informerd.io/inject"
	// DefaultConfigMap is the ConfigMap used without AnnotationConfig.
	DefaultConfigMap = "informerd-sidecar"
	// ContainerName is the sidecar's name; a Pod that has a container so
	// named is not injected again.
	ContainerName = "informerd"
)

// Paths in the sidecar and the app containers.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	sharedDir         = "/var/run/informerd"
	caFile            = sharedDir + "/ca.crt"
	stateDir          = "/var/lib/informerd"
	configDir         = "/etc/informerd"

	volShared = "informerd-shared"
	volState  = "informerd-state"
	volConfig = "informerd-config"
	volAccess = "informerd-kube-api-access"
)

// Options are what every injected sidecar gets.
type Options struct {
	// Image is informerd's image.
	Image string
	// KubeAPIPort, GRPCPort and MetricsPort are the sidecar's ports (the
	// first two on 127.0.0.1; metrics on every address, for the probes).
	KubeAPIPort, GRPCPort, MetricsPort int
	// Resources are the sidecar's requests and limits.
	Resources corev1.ResourceRequirements
}

// DefaultOptions are the ports and resources deploy/ uses.
func DefaultOptions(image string) Options {
	return Options{
		Image: image, KubeAPIPort: 16443, GRPCPort: 16444, MetricsPort: 16445,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	}
}

// Decision is what to do with a Pod.
type Decision struct {
	// Inject: add the sidecar, configured from ConfigMap.
	Inject    bool
	ConfigMap string
	// Reason says why a Pod that asked for injection is not injected
	// (a warning and an Event); empty when it did not ask or is injected.
	Reason string
}

// Decide reads the Pod's annotations: namespaceEnabled is whether its
// namespace carries LabelNamespace=enabled.
func Decide(pod *corev1.Pod, namespaceEnabled bool) Decision {
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Name == ContainerName {
			return Decision{} // injected already
		}
	}
	want := namespaceEnabled
	if v, ok := pod.Annotations[AnnotationInject]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Decision{Reason: fmt.Sprintf("annotation %s=%q is not true or false; the pod is not injected", AnnotationInject, v)}
		}
		want = b
	}
	if !want {
		return Decision{}
	}
	cm := DefaultConfigMap
	if v, ok := pod.Annotations[AnnotationConfig]; ok {
		if v == "" {
			return Decision{Reason: fmt.Sprintf("annotation %s is empty; name the ConfigMap of informerd's configuration", AnnotationConfig)}
		}
		cm = v
	}
	return Decision{Inject: true, ConfigMap: cm}
}

// Mutate returns pod with informerd injected, configured from configMap.
// pod is not changed.
func Mutate(pod *corev1.Pod, configMap string, o Options) *corev1.Pod {
	p := pod.DeepCopy()
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["informerd.io/sidecar"] = "true"
	if p.Spec.ServiceAccountName == "" {
		// What the ServiceAccount admission plugin sets, before webhooks,
		// where it runs; the token projection needs it.
		p.Spec.ServiceAccountName = "default"
	}
	sidecar := corev1.Container{
		Name:          ContainerName,
		Image:         o.Image,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Args: []string{
			"--config=" + configDir + "/config.yaml",
			"--kube-api-address=127.0.0.1:" + strconv.Itoa(o.KubeAPIPort),
			"--kube-api-tls-self-signed=" + caFile,
			"--grpc-address=127.0.0.1:" + strconv.Itoa(o.GRPCPort),
			"--metrics-address=:" + strconv.Itoa(o.MetricsPort),
			"--state-dir=" + stateDir,
		},
		// deploy/monitoring's PodMonitor scrapes this port of pods labelled
		// informerd.io/sidecar=true.
		Ports:     []corev1.ContainerPort{{Name: "informerd-http", ContainerPort: int32(o.MetricsPort)}},
		Resources: o.Resources,
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(int32(o.MetricsPort))}},
			PeriodSeconds:    1,
			FailureThreshold: 300,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: volConfig, MountPath: configDir, ReadOnly: true},
			{Name: volShared, MountPath: sharedDir},
			{Name: volState, MountPath: stateDir},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	// The sidecar keeps the pod's own service account mount: it talks to
	// the API server.
	if m, ok := serviceAccountMount(p); ok {
		sidecar.VolumeMounts = append(sidecar.VolumeMounts, m)
	}
	p.Spec.InitContainers = append([]corev1.Container{sidecar}, p.Spec.InitContainers...)
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: volConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
		corev1.Volume{Name: volShared, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volState, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// The app's service account folder: its own token and namespace,
		// and a placeholder ca.crt that the app containers' mount of
		// informerd's CA covers.
		corev1.Volume{Name: volAccess, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		}}},
	)
	redirect := func(c *corev1.Container) {
		env := []corev1.EnvVar{
			{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
			{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(o.KubeAPIPort)},
		}
		for _, e := range c.Env {
			if e.Name != "KUBERNETES_SERVICE_HOST" && e.Name != "KUBERNETES_SERVICE_PORT" {
				env = append(env, e)
			}
		}
		c.Env = env
		var mounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if m.MountPath != serviceAccountDir {
				mounts = append(mounts, m)
			}
		}
		c.VolumeMounts = append(mounts,
			corev1.VolumeMount{Name: volAccess, MountPath: serviceAccountDir, ReadOnly: true},
			corev1.VolumeMount{Name: volShared, MountPath: serviceAccountDir + "/ca.crt", SubPath: "ca.crt", ReadOnly: true},
		)
	}
	for i := range p.Spec.Containers {
		redirect(&p.Spec.Containers[i])
	}
	for i := 1; i < len(p.Spec.InitContainers); i++ {
		// The sidecar starts first, so the app's init containers reach it.
		redirect(&p.Spec.InitContainers[i])
	}
	return p
}

// serviceAccountMount is the pod's own service account mount, which the
// ServiceAccount admission plugin added before webhooks run.
func serviceAccountMount(p *corev1.Pod) (corev1.VolumeMount, bool) {
	for _, c := range append(p.Spec.Containers, p.Spec.InitContainers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == serviceAccountDir {
				return m, true
			}
		}
	}
	return corev1.VolumeMount{}, false
}
