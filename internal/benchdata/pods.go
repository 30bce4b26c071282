// Package benchdata makes realistic Kubernetes objects for benchmarks and
// tests: Pods with labels, owner references, two containers, a status with
// conditions and managedFields, as a controller-created Pod has.
package benchdata

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Pod returns pod i of a set spread over nodes node names, at resourceVersion rv.
func Pod(i, nodes int, rv uint64) *corev1.Pod {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	name := fmt.Sprintf("web-7c9f8d6b5-%05d", i)
	app := fmt.Sprintf("app-%d", i%50)
	trueVal := true
	fields := func(manager string) *metav1.FieldsV1 {
		return metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b1c\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}},"k:{\"name\":\"proxy\"}":{".":{},"f:image":{}}}},"f:status":{"f:conditions":{}},"manager":"` + manager + `"}`)
	}
	container := func(n, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:  n,
			Image: image,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}
	}
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: created}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         fmt.Sprintf("team-%d", i%10),
			UID:               types.UID(fmt.Sprintf("5f0c2b1e-8d4a-4c7b-9e2f-%012d", i)),
			ResourceVersion:   fmt.Sprint(rv),
			GenerateName:      "web-7c9f8d6b5-",
			CreationTimestamp: created,
			Labels:            map[string]string{"app": app, "pod-template-hash": "7c9f8d6b5", "tier": "frontend", "team": fmt.Sprintf("team-%d", i%10), "version": "v1.2.3"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-02T03:04:05Z"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7c9f8d6b5",
				UID: "0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e", Controller: &trueVal, BlockOwnerDeletion: &trueVal,
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: fields("kube-controller-manager")},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: fields("kubelet"), Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			NodeName:           fmt.Sprintf("node-%03d", i%nodes),
			Containers:         []corev1.Container{container("web", "registry.example/web:1.2.3", 8080), container("proxy", "registry.example/proxy:0.9", 15001)},
			ServiceAccountName: "default",
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			SchedulerName:      "default-scheduler",
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
			}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
			HostIP:     "10.0.0.1",
			PodIP:      fmt.Sprintf("10.1.%d.%d", (i/250)%250, i%250),
			StartTime:  &created,
			QOSClass:   corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "web", Ready: true, Image: "registry.example/web:1.2.3", ImageID: "registry.example/web@sha256:0123456789abcdef", ContainerID: "containerd://abcdef0123456789", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
				{Name: "proxy", Ready: true, Image: "registry.example/proxy:0.9", ImageID: "registry.example/proxy@sha256:fedcba9876543210", ContainerID: "containerd://9876543210fedcba", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
			},
		},
	}
}

// Unstructured converts a typed object the way the dynamic client would
// decode it from the API server's JSON.
func Unstructured(obj any) *unstructured.Unstructured {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		panic(err)
	}
	return u
}
