package kubeproto_test

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/informerd/informerd/internal/benchdata"
)

// fixtures returns one realistic object of each kind the unit tests cover,
// with TypeMeta set, using the field shapes that are easy to get wrong in
// protobuf: quantities, int-or-string, Time and MicroTime, pointers to
// empty structs, bytes maps with an empty value, durations and enums.
func fixtures() []runtime.Object {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	micro := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: "6f1d2c3b-0000-4000-8000-000000000001",
			ResourceVersion: "4711", Generation: 3, CreationTimestamp: created,
			Labels:      map[string]string{"app": "web", "tier": "frontend"},
			Annotations: map[string]string{"note": "ünïcode ✓"},
			Finalizers:  []string{"example.com/guard"},
		}
	}
	labels := map[string]string{"app": "web"}
	podTemplate := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example/web:1.2.3",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1.5Gi"),
				}},
				SecurityContext: &corev1.SecurityContext{},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}

	pod := benchdata.Pod(7, 3, 4711)

	return []runtime.Object{
		pod,
		&corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: meta("node-001", ""),
			Spec: corev1.NodeSpec{
				PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00::/64"},
				Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &created}},
			},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"), "hugepages-2Mi": resource.MustParse("0")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7800m"), corev1.ResourceMemory: resource.MustParse("31Gi")},
				Conditions: []corev1.NodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: created, LastTransitionTime: created,
					Reason: "KubeletReady", Message: "kubelet is posting ready status",
				}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: "node-001"}},
				NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
				Images:    []corev1.ContainerImage{{Names: []string{"registry.example/web@sha256:00", "registry.example/web:1.2.3"}, SizeBytes: 123456789}},
			},
		},
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta("settings", "team-1"),
			Data:       map[string]string{"a.yaml": "x: 1\n", "empty": ""},
			BinaryData: map[string][]byte{"blob": {0, 1, 2, 255}, "none": {}},
			Immutable:  ptr.To(false),
		},
		&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta("token", "team-1"),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"password": []byte("hunter2"), "empty": {}},
		},
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta("web", "team-1"),
			Spec: corev1.ServiceSpec{
				Selector: labels, Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.10", ClusterIPs: []string{"10.0.0.10"},
				Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
					{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolTCP},
				},
				SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
			},
		},
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta("web", "team-1"),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate,
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromInt32(1)),
				}},
				RevisionHistoryLimit: ptr.To[int32](10), ProgressDeadlineSeconds: ptr.To[int32](600),
			},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 2, Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: created, LastTransitionTime: created, Reason: "MinimumReplicasAvailable",
			}}},
		},
		&corev1.Event{
			TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta:     meta("web.1812a3b4c5d6e7f8", "team-1"),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-1", Name: "web", UID: "6f1d2c3b-0000-4000-8000-000000000002", APIVersion: "v1", FieldPath: "spec.containers{web}"},
			Reason:         "BackOff", Message: "Back-off restarting failed container", Type: corev1.EventTypeWarning,
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-001"},
			FirstTimestamp: created, LastTimestamp: created, Count: 12,
			EventTime: micro, ReportingController: "kubelet", ReportingInstance: "node-001",
			Series: &corev1.EventSeries{Count: 12, LastObservedTime: micro},
		},
		&eventsv1.Event{
			TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
			ObjectMeta: meta("web.1812a3b4c5d6e7f9", "team-1"),
			EventTime:  micro, ReportingController: "example.com/controller", ReportingInstance: "controller-0",
			Action: "Scale", Reason: "ScalingReplicaSet", Note: "Scaled up", Type: "Normal",
			Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "team-1", Name: "web"},
		},
		&coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: meta("kube-controller-manager", "kube-system"),
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("node-001_6f1d2c3b"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &micro, RenewTime: &micro, LeaseTransitions: ptr.To[int32](2),
			},
		},
		&discoveryv1.EndpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  meta("web-abcde", "team-1"),
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.244.1.5"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "team-1", Name: "web-1", UID: "6f1d2c3b-0000-4000-8000-000000000003"},
				NodeName:   ptr.To("node-001"), Zone: ptr.To("zone-a"),
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		},
		&batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: meta("migrate", "team-1"),
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
				CompletionMode: ptr.To(batchv1.NonIndexedCompletion), Suspend: ptr.To(false),
				Template: func() corev1.PodTemplateSpec {
					t := *podTemplate.DeepCopy()
					t.Spec.RestartPolicy = corev1.RestartPolicyNever
					return t
				}(),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42},
					},
				}}},
			},
			Status: batchv1.JobStatus{StartTime: &created, Active: 1, Ready: ptr.To[int32](0), UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}},
		},
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: meta("team-1", ""),
			Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		},
	}
}
