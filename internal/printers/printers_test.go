//lint:file-ignore SA1019 kube-apiserver v1.37 still serves and prints v1 Endpoints.

package printers

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// now is the time the unit tests print at.
var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// objectMeta is created an hour before now.
func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: ago(time.Hour)}
}

func mustJSON(t *testing.T, obj any) []byte {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rowCase is one object and the row expected of it.
type rowCase struct {
	name       string
	obj        any
	want       []any
	conditions []metav1.TableRowCondition
}

func testRows(t *testing.T, gr schema.GroupResource, cases []rowCase) {
	t.Helper()
	p, ok := For(gr)
	if !ok {
		t.Fatalf("For(%s): no printer", gr)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cells, conditions, err := p.Row(mustJSON(t, tc.obj), now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cells); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.conditions, conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if len(cells) != len(p.Columns()) {
				t.Errorf("%d cells for %d columns", len(cells), len(p.Columns()))
			}
		})
	}
}

var podType = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

func TestPod(t *testing.T) {
	restartable := container("sidecar")
	restartable.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	crash := waiting("app", "CrashLoopBackOff")
	crash.RestartCount = 5
	crash.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: ago(3 * time.Minute)}
	sidecar := running("sidecar", true, 2, ago(time.Hour))
	sidecar.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: ago(10 * time.Minute)}
	testRows(t, schema.GroupResource{Resource: "pods"}, []rowCase{
		{
			name: "pending",
			obj:  corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("a", "b"), Status: corev1.PodStatus{Phase: corev1.PodPending}},
			want: []any{"p", "0/2", "Pending", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "running and ready, ip from podIP, readiness gates",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"),
				Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{container("a")}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "g1"}, {ConditionType: "g2"}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
					Conditions:        []corev1.PodCondition{{Type: "g1", Status: corev1.ConditionTrue}, {Type: "g2", Status: corev1.ConditionFalse}},
					ContainerStatuses: []corev1.ContainerStatus{running("a", true, 0, ago(time.Hour))}}},
			want: []any{"p", "1/1", "Running", "0", "60m", "10.0.0.1", "n1", "<none>", "1/2"},
		},
		{
			name: "crashloop with restarts",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("app", "sidecar"),
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{crash, sidecar}}},
			want: []any{"p", "1/2", "CrashLoopBackOff", "7 (3m ago)", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "succeeded",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("a"),
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{terminated("a", 0, "Completed", ago(time.Minute))}}},
			want:       []any{"p", "0/1", "Completed", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
			conditions: podSuccessConditions,
		},
		{
			name: "failed by signal",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("a"),
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}}}}},
			want:       []any{"p", "0/1", "Signal:9", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
			conditions: podFailedConditions,
		},
		{
			name: "init container waiting",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"),
				Spec:   corev1.PodSpec{InitContainers: []corev1.Container{container("i1"), container("i2")}, Containers: []corev1.Container{container("a")}},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{terminated("i1", 0, "Completed", ago(time.Minute)), waiting("i2", "PodInitializing")}}},
			want: []any{"p", "0/1", "Init:1/2", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "native sidecar counts as a container",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"),
				Spec: corev1.PodSpec{InitContainers: []corev1.Container{restartable}, Containers: []corev1.Container{container("a")}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
					InitContainerStatuses: []corev1.ContainerStatus{sidecar}, ContainerStatuses: []corev1.ContainerStatus{running("a", true, 0, ago(time.Hour))}}},
			want: []any{"p", "2/2", "Running", "2 (10m ago)", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "terminating",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: ago(time.Hour), DeletionTimestamp: ptr.To(ago(0))},
				Spec: podSpec("a"), Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			want: []any{"p", "0/1", "Terminating", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "node lost",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: ago(time.Hour), DeletionTimestamp: ptr.To(ago(0))},
				Spec: podSpec("a"), Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"}},
			want: []any{"p", "0/1", "Unknown", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "scheduling gated",
			obj: corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("a"),
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonSchedulingGated}}}},
			want: []any{"p", "0/1", "SchedulingGated", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
		},
	})
}

func TestNode(t *testing.T) {
	typ := metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	testRows(t, schema.GroupResource{Resource: "nodes"}, []rowCase{
		{
			name: "ready with roles and addresses",
			obj: corev1.Node{TypeMeta: typ, ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: ago(50 * time.Hour), Labels: map[string]string{
				"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "infra"}},
				Status: corev1.NodeStatus{
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
					Addresses:  []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
					NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Linux", KernelVersion: "6.1", Architecture: "arm64", ContainerRuntimeVersion: "containerd://2"},
				}},
			want: []any{"n", "Ready", "control-plane,infra,worker", "2d2h", "v1.37.2", "10.0.0.1", "1.2.3.4", "Linux", "6.1 (arm64)", "containerd://2"},
		},
		{
			name: "not ready and cordoned",
			obj: corev1.Node{TypeMeta: typ, ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: ago(time.Minute)}, Spec: corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
			want: []any{"n", "NotReady,SchedulingDisabled", "<none>", "60s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "no conditions",
			obj:  corev1.Node{TypeMeta: typ, ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: ago(time.Minute)}},
			want: []any{"n", "Unknown", "<none>", "60s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
	})
}

func TestService(t *testing.T) {
	typ := metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	ports := []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}}
	testRows(t, schema.GroupResource{Resource: "services"}, []rowCase{
		{
			name: "cluster ip",
			obj: corev1.Service{TypeMeta: typ, ObjectMeta: objectMeta("s"), Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"}, Ports: ports[:1], Selector: map[string]string{"b": "2", "a": "1"}}},
			want: []any{"s", "ClusterIP", "10.96.0.1", "<none>", "80/TCP", "60m", "a=1,b=2"},
		},
		{
			name: "load balancer with external ips",
			obj: corev1.Service{TypeMeta: typ, ObjectMeta: objectMeta("s"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.0.2"}, Ports: ports, ExternalIPs: []string{"5.6.7.8"}},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "9.9.9.9"}, {Hostname: "a-very-long-hostname.example.com"}}}}},
			want: []any{"s", "LoadBalancer", "10.96.0.2", "9.9.9.9,a-very-long-hostname.example.com,5.6.7.8", "80/TCP,53:30053/UDP", "60m", "<none>"},
		},
		{
			name: "pending load balancer",
			obj:  corev1.Service{TypeMeta: typ, ObjectMeta: objectMeta("s"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
			want: []any{"s", "LoadBalancer", "<none>", "<pending>", "<none>", "60m", "<none>"},
		},
		{
			name: "external name",
			obj:  corev1.Service{TypeMeta: typ, ObjectMeta: objectMeta("s"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
			want: []any{"s", "ExternalName", "<none>", "db.example.com", "<none>", "60m", "<none>"},
		},
	})
}

func TestEndpoints(t *testing.T) {
	testRows(t, schema.GroupResource{Resource: "endpoints"}, []rowCase{{
		name: "more than three",
		obj: corev1.Endpoints{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"}, ObjectMeta: objectMeta("e"), Subsets: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "fd00::1"}}, Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}},
		}},
		want: []any{"e", "10.0.0.1:80,[fd00::1]:80,10.0.0.1:443 + 1 more...", "60m"},
	}})
	testRows(t, schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, []rowCase{{
		name: "ports by number and name",
		obj: discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}, ObjectMeta: objectMeta("e"), AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("http")}, {}, {Port: ptr.To[int32](1)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
		want: []any{"e", "IPv4", "80,http,* + 1 more...", "10.0.0.1", "60m"},
	}})
}

func TestWorkloads(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: podSpec("a", "b")}
	tmpl.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	testRows(t, schema.GroupResource{Group: "apps", Resource: "deployments"}, []rowCase{{
		name: "status",
		obj: appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: objectMeta("d"),
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: selector, Template: tmpl},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1, UpdatedReplicas: 2, AvailableReplicas: 1}},
		want: []any{"d", "1/3", int64(2), int64(1), "60m", "a,b", "registry.example/a:1,registry.example/b:1", "app=x"},
	}})
	testRows(t, schema.GroupResource{Group: "apps", Resource: "statefulsets"}, []rowCase{{
		name: "replicas defaulted",
		obj: appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: objectMeta("s"),
			Spec: appsv1.StatefulSetSpec{Selector: selector, Template: tmpl}},
		want: []any{"s", "0/1", "60m", "a,b", "registry.example/a:1,registry.example/b:1"},
	}})
	testRows(t, schema.GroupResource{Group: "apps", Resource: "daemonsets"}, []rowCase{{
		name: "status",
		obj: appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: objectMeta("d"), Spec: appsv1.DaemonSetSpec{Selector: selector, Template: tmpl},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberReady: 1, UpdatedNumberScheduled: 2, NumberAvailable: 1}},
		want: []any{"d", int64(3), int64(2), int64(1), int64(2), int64(1), "disk=ssd", "60m", "a,b", "registry.example/a:1,registry.example/b:1", "app=x"},
	}})
}

func TestJob(t *testing.T) {
	typ := metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	spec := batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec("a")}}
	parallel := spec
	parallel.Parallelism = ptr.To[int32](3)
	testRows(t, schema.GroupResource{Group: "batch", Resource: "jobs"}, []rowCase{
		{
			name: "running",
			obj:  batchv1.Job{TypeMeta: typ, ObjectMeta: objectMeta("j"), Spec: parallel, Status: batchv1.JobStatus{StartTime: ptr.To(ago(90 * time.Second))}},
			want: []any{"j", "Running", "0/1 of 3", "90s", "60m", "a", "registry.example/a:1", "<none>"},
		},
		{
			name: "complete",
			obj: batchv1.Job{TypeMeta: typ, ObjectMeta: objectMeta("j"), Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Template: spec.Template},
				Status: batchv1.JobStatus{Succeeded: 2, StartTime: ptr.To(ago(10 * time.Minute)), CompletionTime: ptr.To(ago(time.Minute)),
					Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}, {Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
			want: []any{"j", "Complete", "2/2", "9m", "60m", "a", "registry.example/a:1", "<none>"},
		},
		{
			name: "failure target",
			obj: batchv1.Job{TypeMeta: typ, ObjectMeta: objectMeta("j"), Spec: spec,
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}}},
			want: []any{"j", "FailureTarget", "0/1", "", "60m", "a", "registry.example/a:1", "<none>"},
		},
	})
	testRows(t, schema.GroupResource{Group: "batch", Resource: "cronjobs"}, []rowCase{{
		name: "suspended with time zone",
		obj: batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: objectMeta("c"),
			Spec:   batchv1.CronJobSpec{Schedule: "@daily", TimeZone: ptr.To("Etc/UTC"), Suspend: ptr.To(true), JobTemplate: batchv1.JobTemplateSpec{Spec: spec}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "c-1"}}, LastScheduleTime: ptr.To(ago(25 * time.Hour))}},
		want: []any{"c", "@daily", "Etc/UTC", "True", int64(1), "25h", "60m", "a", "registry.example/a:1", "<none>"},
	}})
}

func TestEvents(t *testing.T) {
	testRows(t, schema.GroupResource{Resource: "events"}, []rowCase{
		{
			name: "legacy event with count",
			obj: corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}, ObjectMeta: objectMeta("e"), Type: "Warning", Reason: "BackOff",
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{a}"}, Message: " back-off \n",
				FirstTimestamp: ago(20 * time.Minute), LastTimestamp: ago(30 * time.Second), Count: 4, Source: corev1.EventSource{Component: "kubelet", Host: "n1"}},
			want: []any{"30s", "Warning", "BackOff", "pod/p", "spec.containers{a}", "kubelet, n1", "back-off", "20m", int64(4), "e"},
		},
		{
			name: "singleton of the new API",
			obj: corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}, ObjectMeta: objectMeta("e"), InvolvedObject: corev1.ObjectReference{Kind: "Node"},
				EventTime: metav1.NewMicroTime(now.Add(-5 * time.Minute)), ReportingController: "ctrl"},
			want: []any{"5m", "", "", "node", "", "ctrl", "", "5m", int64(1), "e"},
		},
	})
	testRows(t, schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, []rowCase{{
		name: "series",
		obj: eventsv1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"}, ObjectMeta: objectMeta("e"), Type: "Normal", Reason: "Pulled", Note: "pulled",
			Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"}, EventTime: metav1.NewMicroTime(now.Add(-time.Hour)), ReportingController: "kubelet", ReportingInstance: "n1",
			Series: &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-2 * time.Minute))}},
		want: []any{"2m", "Normal", "Pulled", "pod/p", "", "kubelet, n1", "pulled", "60m", int64(7), "e"},
	}})
}

func TestCoreObjects(t *testing.T) {
	testRows(t, schema.GroupResource{Resource: "secrets"}, []rowCase{{
		name: "string data merges into data",
		obj: corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: objectMeta("s"), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"a": nil}, StringData: map[string]string{"a": "", "b": ""}},
		want: []any{"s", "Opaque", int64(2), "60m"},
	}})
	testRows(t, schema.GroupResource{Resource: "configmaps"}, []rowCase{{
		name: "data and binary data",
		obj:  corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: objectMeta("c"), Data: map[string]string{"a": ""}, BinaryData: map[string][]byte{"b": nil}},
		want: []any{"c", int64(2), "60m"},
	}})
	testRows(t, schema.GroupResource{Resource: "persistentvolumes"}, []rowCase{{
		name: "bound, beta class annotation wins",
		obj: corev1.PersistentVolume{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: "pv", CreationTimestamp: ago(time.Hour), Annotations: map[string]string{"volume.beta.kubernetes.io/storage-class": "beta"}},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}, StorageClassName: "spec",
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "c"}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}},
		want: []any{"pv", "5Gi", "RWO,RWX", "Retain", "Bound", "ns/c", "beta", "<unset>", "", "60m", "<unset>"},
	}})
	testRows(t, schema.GroupResource{Resource: "persistentvolumeclaims"}, []rowCase{{
		name: "pending",
		obj: corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: objectMeta("c"),
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("std"), VolumeAttributesClassName: ptr.To("gold"), VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem)},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
		want: []any{"c", "Pending", "", "", "", "std", "gold", "60m", "Filesystem"},
	}})
	testRows(t, schema.GroupResource{Resource: "resourcequotas"}, []rowCase{{
		name: "requests and limits",
		obj: corev1.ResourceQuota{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"}, ObjectMeta: objectMeta("q"), Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "limits.cpu": resource.MustParse("2"), "requests.cpu": resource.MustParse("1")},
			Used: corev1.ResourceList{"pods": resource.MustParse("1"), "requests.cpu": resource.MustParse("500m")}}},
		want: []any{"q", "pods: 1/10, requests.cpu: 500m/1", "limits.cpu: 0/2", "60m"},
	}})
}

func TestOtherGroups(t *testing.T) {
	testRows(t, schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, []rowCase{{
		name: "four hosts and tls",
		obj: networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}, ObjectMeta: objectMeta("i"), Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: "a"}, {Host: "b"}, {Host: "c"}, {Host: "d"}}, TLS: []networkingv1.IngressTLS{{}}}},
		want: []any{"i", "<none>", "a,b,c + 1 more...", "", "80, 443", "60m"},
	}})
	testRows(t, schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, []rowCase{{
		name: "subjects",
		obj: rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: objectMeta("b"),
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "u1"}, {Kind: "User", Name: "u2"}, {Kind: "ServiceAccount", Namespace: "ns", Name: "sa"}, {Kind: "Other", Name: "x"}}},
		want: []any{"b", "ClusterRole/view", "60m", "u1, u2", "", "ns/sa"},
	}})
	testRows(t, schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, []rowCase{{
		name: "percent",
		obj: map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "p", "creationTimestamp": ago(time.Hour)},
			"spec": map[string]any{"maxUnavailable": "25%"}, "status": map[string]any{"disruptionsAllowed": 2}},
		want: []any{"p", "N/A", "25%", int64(2), "60m"},
	}})
	hpaType := metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}
	testRows(t, schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, []rowCase{{
		name: "three metrics",
		obj: autoscalingv2.HorizontalPodAutoscaler{TypeMeta: hpaType, ObjectMeta: objectMeta("h"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "d"}, MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{AverageUtilization: ptr.To[int32](50)}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Target: autoscalingv2.MetricTarget{AverageValue: ptr.To(resource.MustParse("1"))}}},
			}},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, CurrentMetrics: []autoscalingv2.MetricStatus{
				{Resource: &autoscalingv2.ResourceMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](20)}}},
			}}},
		want: []any{"h", "Deployment/d", "cpu: 20%/50%, memory: <unknown>/<auto> + 1 more...", "<unset>", int64(5), int64(2), "60m"},
	}})
}

func TestVersionMismatch(t *testing.T) {
	p, _ := For(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"})
	_, _, err := p.Row(mustJSON(t, autoscalingv1.HorizontalPodAutoscaler{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"}}), now)
	if !errors.Is(err, ErrVersion) {
		t.Errorf("Row of an autoscaling/v1 object: got error %v, want ErrVersion", err)
	}
}

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		gr   schema.GroupResource
		want bool
	}{
		{name: "pods", gr: schema.GroupResource{Resource: "pods"}, want: true},
		{name: "roles print as default", gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}, want: false},
		{name: "limitranges print as default", gr: schema.GroupResource{Resource: "limitranges"}, want: false},
		{name: "csistoragecapacities print as default", gr: schema.GroupResource{Group: "storage.k8s.io", Resource: "csistoragecapacities"}, want: false},
		{name: "custom resource", gr: schema.GroupResource{Group: "example.com", Resource: "widgets"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := For(tc.gr); ok != tc.want {
				t.Errorf("For(%s) = _, %v, want %v", tc.gr, ok, tc.want)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	cells, _, err := Default.Row([]byte(`{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"l","creationTimestamp":"2026-06-01T11:00:00Z"}}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"l", "2026-06-01T11:00:00Z"}, cells); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}
}

func TestList(t *testing.T) {
	sc := func(name string, created time.Duration, annotation string) []byte {
		obj := storagev1.StorageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created)}, Provisioner: "p"}
		if annotation != "" {
			obj.Annotations = map[string]string{annotation: "true"}
		}
		return mustJSON(t, obj)
	}
	fs := func(name string, precedence int32) []byte {
		return mustJSON(t, flowcontrolv1.FlowSchema{TypeMeta: metav1.TypeMeta{APIVersion: "flowcontrol.apiserver.k8s.io/v1", Kind: "FlowSchema"},
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(time.Hour)}, Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: precedence}})
	}
	for _, tc := range []struct {
		name  string
		gr    schema.GroupResource
		items [][]byte
		want  []string // the rows' names, in order
	}{
		{
			name: "the most recent default storage class",
			gr:   schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"},
			items: [][]byte{sc("old", 2*time.Hour, "storageclass.kubernetes.io/is-default-class"), sc("plain", time.Minute, ""),
				sc("new", time.Hour, "storageclass.beta.kubernetes.io/is-default-class")},
			want: []string{"old", "plain", "new (default)"},
		},
		{
			name:  "flow schemas by precedence then name",
			gr:    schema.GroupResource{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"},
			items: [][]byte{fs("c", 500), fs("b", 100), fs("a", 500)},
			want:  []string{"b", "a", "c"},
		},
		{
			name:  "others keep the order",
			gr:    schema.GroupResource{Resource: "namespaces"},
			items: [][]byte{[]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"z"}}`), []byte(`{"metadata":{"name":"a"}}`)},
			want:  []string{"z", "a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := For(tc.gr)
			rows, err := p.List(tc.items, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.Cells[0].(string))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	for gr, p := range registry {
		t.Run(gr.String(), func(t *testing.T) {
			cols := p.Columns()
			if len(cols) == 0 {
				t.Fatal("no columns")
			}
			for _, c := range cols {
				if c.Name == "" || c.Type == "" {
					t.Errorf("column %+v lacks a name or type", c)
				}
			}
		})
	}
}

func BenchmarkPodRow(b *testing.B) {
	pod := corev1.Pod{TypeMeta: podType, ObjectMeta: objectMeta("p"), Spec: podSpec("app", "proxy"), Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: conditions(corev1.ConditionTrue, corev1.ConditionTrue, ago(time.Hour)),
		ContainerStatuses: []corev1.ContainerStatus{running("app", true, 0, ago(time.Hour)), running("proxy", true, 1, ago(time.Hour))},
	}}
	data, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := For(schema.GroupResource{Resource: "pods"})
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := p.Row(data, now); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzPodRow(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"status":{"phase":"Running","initContainerStatuses":[{"name":"i","state":{}}]}}`))
	f.Add([]byte(`{"spec":{"initContainers":[{"name":"i","restartPolicy":"Always"}]},"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1}}}]}}`))
	p, _ := For(schema.GroupResource{Resource: "pods"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cells, _, err := p.Row(data, now)
		if err == nil && len(cells) != len(p.Columns()) {
			t.Errorf("%d cells for %d columns", len(cells), len(p.Columns()))
		}
	})
}
