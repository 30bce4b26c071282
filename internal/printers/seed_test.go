//lint:file-ignore SA1019 kube-apiserver v1.37 still serves and prints v1 Endpoints.

package printers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	seedNamespace        = "printers"
	terminatingNamespace = "printers-terminating"
	defaultStorageClass  = "fast"
	// testFinalizer keeps deleted objects, so that they print as Terminating.
	testFinalizer = "informerd.io/printers-test"
)

var (
	seedOnce sync.Once
	seedErr  error
)

// seed creates the objects the tests list, once per test binary.
func seed(t *testing.T) {
	t.Helper()
	seedOnce.Do(func() {
		c, err := crclient.New(env.Config, crclient.Options{})
		if err != nil {
			seedErr = err
			return
		}
		s := &seeder{ctx: context.Background(), c: c, now: time.Now().Truncate(time.Second)}
		seedErr = s.run()
	})
	if seedErr != nil {
		t.Fatalf("seed: %v", seedErr)
	}
}

// seeder creates objects and remembers the first error.
type seeder struct {
	ctx context.Context
	c   crclient.Client
	now time.Time
	err error
}

func (s *seeder) ago(d time.Duration) metav1.Time { return metav1.NewTime(s.now.Add(-d)) }

func (s *seeder) microAgo(d time.Duration) metav1.MicroTime {
	return metav1.NewMicroTime(s.now.Add(-d))
}

// create creates obj; when status is not nil it then sets the status by
// calling status on the created object and updating the status subresource.
func (s *seeder) create(obj crclient.Object, status func()) {
	if s.err != nil {
		return
	}
	if obj.GetNamespace() == "" && namespaced(obj) {
		obj.SetNamespace(seedNamespace)
	}
	if err := s.c.Create(s.ctx, obj); err != nil {
		s.err = fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		return
	}
	if status != nil {
		status()
		if err := s.c.Status().Update(s.ctx, obj); err != nil {
			s.err = fmt.Errorf("update status of %T %s: %w", obj, obj.GetName(), err)
		}
	}
}

// deleteKept deletes obj, which a finalizer keeps.
func (s *seeder) deleteKept(obj crclient.Object) {
	if s.err != nil {
		return
	}
	if err := s.c.Delete(s.ctx, obj); err != nil {
		s.err = fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
	}
}

func namespaced(obj crclient.Object) bool {
	switch obj.(type) {
	case *corev1.Namespace, *corev1.Node, *corev1.PersistentVolume,
		*storagev1.StorageClass, *storagev1.CSIDriver, *storagev1.CSINode, *storagev1.VolumeAttachment, *storagev1.VolumeAttributesClass,
		*schedulingv1.PriorityClass, *nodev1.RuntimeClass, *networkingv1.IngressClass,
		*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *certificatesv1.CertificateSigningRequest,
		*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration,
		*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return false
	}
	return true
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func (s *seeder) run() error {
	s.create(&corev1.Namespace{ObjectMeta: meta(seedNamespace)}, nil)
	s.create(&corev1.Namespace{ObjectMeta: meta(terminatingNamespace)}, nil)
	s.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: terminatingNamespace, Finalizers: []string{testFinalizer}}}, nil)
	s.deleteKept(&corev1.Namespace{ObjectMeta: meta(terminatingNamespace)})
	s.pods()
	s.nodes()
	s.services()
	s.core()
	s.storage()
	s.workloads()
	s.jobs()
	s.events()
	s.networking()
	s.cluster()
	s.quotas()
	return s.err
}

// container is a minimal valid container.
func container(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "registry.example/" + name + ":1"}
}

func podSpec(containers ...string) corev1.PodSpec {
	spec := corev1.PodSpec{}
	for _, c := range containers {
		spec.Containers = append(spec.Containers, container(c))
	}
	return spec
}

func running(name string, ready bool, restarts int32, started metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: name, Image: "registry.example/" + name + ":1", Ready: ready, RestartCount: restarts, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
	}
}

func terminated(name string, exitCode int32, reason string, finished metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: name, Image: "registry.example/" + name + ":1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, StartedAt: finished, FinishedAt: finished}},
	}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: name, Image: "registry.example/" + name + ":1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
	}
}

func conditions(ready, initialized corev1.ConditionStatus, at metav1.Time) []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
		{Type: corev1.PodInitialized, Status: initialized, LastTransitionTime: at},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: at},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: at},
	}
}

func (s *seeder) pods() {
	pending := &corev1.Pod{ObjectMeta: meta("pending"), Spec: podSpec("app")}
	s.create(pending, func() {
		pending.Status.NominatedNodeName = "node-ready"
		pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	})

	gated := &corev1.Pod{ObjectMeta: meta("gated"), Spec: podSpec("app")}
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
	s.create(gated, nil)

	ready := &corev1.Pod{ObjectMeta: meta("running-ready"), Spec: podSpec("app", "proxy")}
	ready.Spec.NodeName = "node-ready"
	ready.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}, {ConditionType: "example.com/other"}}
	s.create(ready, func() {
		ready.Status.Phase = corev1.PodRunning
		ready.Status.PodIP = "10.1.0.5"
		ready.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}
		ready.Status.HostIP = "192.168.0.10"
		ready.Status.Conditions = append(conditions(corev1.ConditionTrue, corev1.ConditionTrue, s.ago(time.Hour)),
			corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue})
		ready.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, s.ago(time.Hour)), running("proxy", true, 0, s.ago(time.Hour))}
	})

	notReady := &corev1.Pod{ObjectMeta: meta("running-not-ready"), Spec: podSpec("app", "proxy")}
	notReady.Spec.NodeName = "node-not-ready"
	s.create(notReady, func() {
		notReady.Status.Phase = corev1.PodRunning
		notReady.Status.PodIP = "10.1.0.6"
		notReady.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionTrue, s.ago(time.Minute))
		notReady.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, s.ago(time.Hour)), running("proxy", false, 0, s.ago(time.Hour))}
	})

	succeeded := &corev1.Pod{ObjectMeta: meta("succeeded"), Spec: podSpec("app")}
	succeeded.Spec.RestartPolicy = corev1.RestartPolicyNever
	s.create(succeeded, func() {
		succeeded.Status.Phase = corev1.PodSucceeded
		succeeded.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionTrue, s.ago(time.Minute))
		succeeded.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", 0, "Completed", s.ago(3*time.Minute))}
	})

	failed := &corev1.Pod{ObjectMeta: meta("failed"), Spec: podSpec("app")}
	failed.Spec.RestartPolicy = corev1.RestartPolicyNever
	s.create(failed, func() {
		failed.Status.Phase = corev1.PodFailed
		failed.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionTrue, s.ago(time.Minute))
		failed.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", 2, "Error", s.ago(3*time.Minute))}
	})

	signal := &corev1.Pod{ObjectMeta: meta("failed-signal"), Spec: podSpec("app")}
	signal.Spec.RestartPolicy = corev1.RestartPolicyNever
	s.create(signal, func() {
		signal.Status.Phase = corev1.PodFailed
		cs := terminated("app", 137, "", s.ago(3*time.Minute))
		cs.State.Terminated.Signal = 9
		signal.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	})

	evicted := &corev1.Pod{ObjectMeta: meta("evicted"), Spec: podSpec("app")}
	s.create(evicted, func() {
		evicted.Status.Phase = corev1.PodFailed
		evicted.Status.Reason = "Evicted"
		evicted.Status.Message = "The node was low on resource: memory."
	})

	crash := &corev1.Pod{ObjectMeta: meta("crashloop"), Spec: podSpec("app", "sidecar")}
	s.create(crash, func() {
		crash.Status.Phase = corev1.PodRunning
		crash.Status.PodIP = "10.1.0.7"
		crash.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionTrue, s.ago(time.Minute))
		app := waiting("app", "CrashLoopBackOff")
		app.RestartCount = 5
		app.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: s.ago(4 * time.Minute), FinishedAt: s.ago(3 * time.Minute)}
		sidecar := running("sidecar", true, 2, s.ago(20*time.Minute))
		sidecar.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: s.ago(40 * time.Minute), FinishedAt: s.ago(30 * time.Minute)}
		crash.Status.ContainerStatuses = []corev1.ContainerStatus{app, sidecar}
	})

	initWaiting := &corev1.Pod{ObjectMeta: meta("init-waiting"), Spec: podSpec("app")}
	initWaiting.Spec.InitContainers = []corev1.Container{container("init-a"), container("init-b")}
	s.create(initWaiting, func() {
		initWaiting.Status.Phase = corev1.PodPending
		initWaiting.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionFalse, s.ago(time.Minute))
		initWaiting.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("init-a", 0, "Completed", s.ago(time.Minute)), waiting("init-b", "PodInitializing")}
		initWaiting.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("app", "PodInitializing")}
	})

	initCrash := &corev1.Pod{ObjectMeta: meta("init-crashloop"), Spec: podSpec("app")}
	initCrash.Spec.InitContainers = []corev1.Container{container("init")}
	s.create(initCrash, func() {
		initCrash.Status.Phase = corev1.PodPending
		initCrash.Status.Conditions = conditions(corev1.ConditionFalse, corev1.ConditionFalse, s.ago(time.Minute))
		init := waiting("init", "CrashLoopBackOff")
		init.RestartCount = 3
		init.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: s.ago(7 * time.Minute), FinishedAt: s.ago(6 * time.Minute)}
		initCrash.Status.InitContainerStatuses = []corev1.ContainerStatus{init}
		initCrash.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("app", "PodInitializing")}
	})

	initFailed := &corev1.Pod{ObjectMeta: meta("init-failed"), Spec: podSpec("app")}
	initFailed.Spec.InitContainers = []corev1.Container{container("init")}
	initFailed.Spec.RestartPolicy = corev1.RestartPolicyNever
	s.create(initFailed, func() {
		initFailed.Status.Phase = corev1.PodFailed
		initFailed.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("init", 3, "", s.ago(time.Minute))}
		initFailed.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("app", "PodInitializing")}
	})

	sidecar := &corev1.Pod{ObjectMeta: meta("native-sidecar"), Spec: podSpec("app")}
	sidecarInit := container("log-shipper")
	sidecarInit.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	sidecar.Spec.InitContainers = []corev1.Container{container("migrate"), sidecarInit}
	s.create(sidecar, func() {
		sidecar.Status.Phase = corev1.PodRunning
		sidecar.Status.Conditions = conditions(corev1.ConditionTrue, corev1.ConditionTrue, s.ago(time.Minute))
		shipper := running("log-shipper", true, 4, s.ago(10*time.Minute))
		shipper.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: s.ago(15 * time.Minute), FinishedAt: s.ago(12 * time.Minute)}
		sidecar.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("migrate", 0, "Completed", s.ago(20*time.Minute)), shipper}
		sidecar.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, s.ago(9*time.Minute))}
	})

	notReadyCompleted := &corev1.Pod{ObjectMeta: meta("completed-and-running"), Spec: podSpec("job", "helper")}
	s.create(notReadyCompleted, func() {
		notReadyCompleted.Status.Phase = corev1.PodRunning
		notReadyCompleted.Status.ContainerStatuses = []corev1.ContainerStatus{running("helper", true, 0, s.ago(time.Minute)), terminated("job", 0, "Completed", s.ago(time.Minute))}
	})

	terminating := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "terminating", Finalizers: []string{testFinalizer}}, Spec: podSpec("app")}
	s.create(terminating, func() {
		terminating.Status.Phase = corev1.PodRunning
		terminating.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, s.ago(time.Minute))}
	})
	s.deleteKept(terminating)

	lost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-lost", Finalizers: []string{testFinalizer}}, Spec: podSpec("app")}
	s.create(lost, func() {
		lost.Status.Phase = corev1.PodRunning
		lost.Status.Reason = "NodeLost"
	})
	s.deleteKept(lost)
}

func (s *seeder) nodes() {
	ready := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-ready", Labels: map[string]string{
		"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "", "kubernetes.io/role": "master",
	}}}
	ready.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	s.create(ready, func() {
		ready.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}
		ready.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "node-ready"},
			{Type: corev1.NodeInternalIP, Address: "192.168.0.10"},
			{Type: corev1.NodeInternalIP, Address: "fd00::10"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.10"},
		}
		ready.Status.NodeInfo = corev1.NodeSystemInfo{
			KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13 (trixie)", KernelVersion: "6.12.0", Architecture: "amd64",
			ContainerRuntimeVersion: "containerd://2.1.0", OperatingSystem: "linux",
		}
	})

	notReady := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-not-ready", Labels: map[string]string{"kubernetes.io/role": "worker"}}}
	notReady.Spec.Unschedulable = true
	notReady.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}
	s.create(notReady, func() {
		notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}
		notReady.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.11"}}
		notReady.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"}
	})

	s.create(&corev1.Node{ObjectMeta: meta("node-unknown"), Spec: corev1.NodeSpec{Unschedulable: true}}, nil)
}

func (s *seeder) services() {
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	s.create(&corev1.Service{ObjectMeta: meta("clusterip"), Spec: corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": "web", "tier": "front"}}}, nil)
	s.create(&corev1.Service{ObjectMeta: meta("clusterip-external"), Spec: corev1.ServiceSpec{Ports: ports[:1], ExternalIPs: []string{"203.0.113.1", "203.0.113.2"}}}, nil)
	s.create(&corev1.Service{ObjectMeta: meta("nodeport"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports}}, nil)
	s.create(&corev1.Service{ObjectMeta: meta("headless"), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}}, nil)
	s.create(&corev1.Service{ObjectMeta: meta("externalname"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}, nil)
	s.create(&corev1.Service{ObjectMeta: meta("lb-pending"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports[:1]}}, nil)
	lb := &corev1.Service{ObjectMeta: meta("lb"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports[:1], ExternalIPs: []string{"203.0.113.3"}}}
	s.create(lb, func() {
		lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {Hostname: "a-very-long-load-balancer-name.elb.example.com"}, {IP: "198.51.100.1"}}
	})
	lbLong := &corev1.Service{ObjectMeta: meta("lb-long"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports[:1]}}
	s.create(lbLong, func() {
		lbLong.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "a-very-long-load-balancer-name.elb.example.com"}}
	})

	//lint:ignore SA1019 Endpoints is deprecated but served and printed.
	s.create(&corev1.Endpoints{ObjectMeta: meta("many"), Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}, {IP: "10.1.0.2"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}},
		{Addresses: []corev1.EndpointAddress{{IP: "fd00::1"}}, Ports: []corev1.EndpointPort{{Port: 8080}}},
	}}, nil)
	s.create(&corev1.Endpoints{ObjectMeta: meta("headless"), Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.3"}, {IP: "10.1.0.4"}}},
	}}, nil)
	s.create(&corev1.Endpoints{ObjectMeta: meta("empty")}, nil)

	s.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  meta("web-abc"),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](80)}, {Name: ptr.To("named")}, {Port: ptr.To[int32](443), Name: ptr.To("https")}, {Name: ptr.To("metrics"), Port: ptr.To[int32](9090)},
		},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1", "10.1.0.2"}}, {Addresses: []string{"10.1.0.3"}}, {Addresses: []string{"10.1.0.4"}}},
	}, nil)
	s.create(&discoveryv1.EndpointSlice{ObjectMeta: meta("empty-abc"), AddressType: discoveryv1.AddressTypeFQDN, Ports: []discoveryv1.EndpointPort{{}}}, nil)
	s.create(&discoveryv1.EndpointSlice{ObjectMeta: meta("none-abc"), AddressType: discoveryv1.AddressTypeIPv6}, nil)
}

func (s *seeder) core() {
	s.create(&corev1.ConfigMap{ObjectMeta: meta("config"), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": {0}}}, nil)
	s.create(&corev1.ConfigMap{ObjectMeta: meta("empty")}, nil)
	s.create(&corev1.Secret{ObjectMeta: meta("opaque"), Data: map[string][]byte{"password": []byte("x")}}, nil)
	s.create(&corev1.Secret{ObjectMeta: meta("string-data"), Data: map[string][]byte{"a": []byte("x")}, StringData: map[string]string{"a": "y", "b": "z"}}, nil)
	s.create(&corev1.Secret{ObjectMeta: meta("tls"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("x")}}, nil)
	s.create(&corev1.ServiceAccount{ObjectMeta: meta("robot")}, nil)
	s.create(&corev1.LimitRange{ObjectMeta: meta("limits"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}, nil)
	s.create(&corev1.PodTemplate{ObjectMeta: meta("template"), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podSpec("app", "proxy")}}, nil)
	rc := &corev1.ReplicationController{ObjectMeta: meta("rc"), Spec: corev1.ReplicationControllerSpec{
		Replicas: ptr.To[int32](3), Selector: map[string]string{"app": "rc"},
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}}, Spec: podSpec("app")},
	}}
	s.create(rc, func() { rc.Status.Replicas = 2; rc.Status.ReadyReplicas = 1 })
}

func (s *seeder) storage() {
	pvSource := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}
	bound := &corev1.PersistentVolume{ObjectMeta: meta("pv-bound"), Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}, PersistentVolumeSource: pvSource,
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteMany},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, StorageClassName: "standard",
		ClaimRef:   &corev1.ObjectReference{Namespace: seedNamespace, Name: "pvc-bound"},
		VolumeMode: ptr.To(corev1.PersistentVolumeBlock),
	}}
	s.create(bound, func() { bound.Status.Phase = corev1.VolumeBound })
	released := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-released", Annotations: map[string]string{"volume.beta.kubernetes.io/storage-class": "beta"}}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1500Mi")}, PersistentVolumeSource: pvSource,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, StorageClassName: "ignored",
	}}
	s.create(released, func() { released.Status.Phase = corev1.VolumeFailed; released.Status.Reason = "RecyclerFailed" })
	terminating := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-terminating", Finalizers: []string{testFinalizer}}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, PersistentVolumeSource: pvSource, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce},
	}}
	s.create(terminating, nil)
	s.deleteKept(terminating)

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: meta("pvc-bound"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pv-bound", StorageClassName: ptr.To("standard"),
		Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
	}}
	s.create(pvc, func() {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce}
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}
	})
	s.create(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc-pending", Annotations: map[string]string{"volume.beta.kubernetes.io/storage-class": "beta"}}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:               []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:                 corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		VolumeAttributesClassName: ptr.To("gold"),
	}}, nil)
	pvcTerminating := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc-terminating", Finalizers: []string{testFinalizer}}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	s.create(pvcTerminating, nil)
	s.deleteKept(pvcTerminating)

	s.create(&storagev1.StorageClass{ObjectMeta: meta("standard"), Provisioner: "example.com/standard"}, nil)
	s.create(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old-default", Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/old"}, nil)
	time.Sleep(time.Second) // the effective default is the most recently created
	s.create(&storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: defaultStorageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "example.com/fast", ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}, nil)
	s.create(&storagev1.VolumeAttributesClass{ObjectMeta: meta("gold"), DriverName: "example.com/csi", Parameters: map[string]string{"iops": "1000"}}, nil)
	s.create(&storagev1.CSIDriver{ObjectMeta: meta("plain.example.com")}, nil)
	s.create(&storagev1.CSIDriver{ObjectMeta: meta("full.example.com"), Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), StorageCapacity: ptr.To(true), RequiresRepublish: ptr.To(true),
		TokenRequests:        []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
	}}, nil)
	s.create(&storagev1.CSINode{ObjectMeta: meta("node-ready"), Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "full.example.com", NodeID: "n1"}}}}, nil)
	attachment := &storagev1.VolumeAttachment{ObjectMeta: meta("attachment"), Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "full.example.com", NodeName: "node-ready", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-bound")},
	}}
	s.create(attachment, func() { attachment.Status.Attached = true })
	s.create(&storagev1.CSIStorageCapacity{ObjectMeta: meta("capacity"), StorageClassName: "standard", Capacity: ptr.To(resource.MustParse("10Gi"))}, nil)
}

func labelSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "back"}}},
	}
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}}, Spec: podSpec("app", "proxy")}
}

func (s *seeder) workloads() {
	d := &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: labelSelector(), Template: template()}}
	s.create(d, func() {
		d.Status = appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 2}
	})
	s.create(&appsv1.Deployment{ObjectMeta: meta("defaulted"), Spec: appsv1.DeploymentSpec{Selector: labelSelector(), Template: template()}}, nil)

	rs := &appsv1.ReplicaSet{ObjectMeta: meta("web-123"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: labelSelector(), Template: template()}}
	s.create(rs, func() {
		rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, FullyLabeledReplicas: 3}
	})
	s.create(&appsv1.ReplicaSet{ObjectMeta: meta("web-0"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: labelSelector(), Template: template()}}, nil)

	sts := &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), ServiceName: "headless", Selector: labelSelector(), Template: template()}}
	s.create(sts, func() {
		sts.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 2, CurrentReplicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}
	})
	s.create(&appsv1.StatefulSet{ObjectMeta: meta("db-defaulted"), Spec: appsv1.StatefulSetSpec{Selector: labelSelector(), Template: template()}}, nil)

	dsTemplate := template()
	dsTemplate.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "disk": "ssd"}
	ds := &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Selector: labelSelector(), Template: dsTemplate}}
	s.create(ds, func() {
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2, NumberUnavailable: 1}
	})
	s.create(&appsv1.DaemonSet{ObjectMeta: meta("agent-plain"), Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template()}}, nil)

	s.create(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db-7d9f", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "6b1e7d5c-0000-4000-8000-000000000001", Controller: ptr.To(true)},
	}}, Revision: 3, Data: runtime.RawExtension{Raw: []byte(`{}`)}}, nil)
	s.create(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "core-rev", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "6b1e7d5c-0000-4000-8000-000000000002", Controller: ptr.To(true)},
	}}, Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{}`)}}, nil)
	s.create(&appsv1.ControllerRevision{ObjectMeta: meta("orphan"), Revision: 7, Data: runtime.RawExtension{Raw: []byte(`{}`)}}, nil)
}

func jobSpec() batchv1.JobSpec {
	t := template()
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	return batchv1.JobSpec{Template: t}
}

func (s *seeder) jobs() {
	running := &batchv1.Job{ObjectMeta: meta("running"), Spec: jobSpec()}
	s.create(running, func() {
		running.Status.StartTime = ptr.To(s.ago(2 * time.Minute))
		running.Status.Active = 1
		running.Status.Ready = ptr.To[int32](1)
	})

	parallel := &batchv1.Job{ObjectMeta: meta("parallel"), Spec: jobSpec()}
	parallel.Spec.Parallelism = ptr.To[int32](3)
	parallel.Spec.Completions = nil
	s.create(parallel, func() {
		parallel.Status.StartTime = ptr.To(s.ago(90 * time.Second))
		parallel.Status.Active = 3
		parallel.Status.Ready = ptr.To[int32](0)
	})

	complete := &batchv1.Job{ObjectMeta: meta("complete"), Spec: jobSpec()}
	complete.Spec.Completions = ptr.To[int32](2)
	complete.Spec.Parallelism = ptr.To[int32](2)
	s.create(complete, func() {
		complete.Status.StartTime = ptr.To(s.ago(10 * time.Minute))
		complete.Status.CompletionTime = ptr.To(s.ago(8*time.Minute + 25*time.Second))
		complete.Status.Succeeded = 2
		complete.Status.Ready = ptr.To[int32](0)
		complete.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: s.ago(9 * time.Minute)},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: s.ago(8 * time.Minute)},
		}
	})

	failed := &batchv1.Job{ObjectMeta: meta("failed"), Spec: jobSpec()}
	s.create(failed, func() {
		failed.Status.StartTime = ptr.To(s.ago(5 * time.Minute))
		failed.Status.Failed = 7
		failed.Status.Ready = ptr.To[int32](0)
		failed.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: s.ago(4 * time.Minute)},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: s.ago(4 * time.Minute)},
		}
	})

	suspended := &batchv1.Job{ObjectMeta: meta("suspended"), Spec: jobSpec()}
	suspended.Spec.Suspend = ptr.To(true)
	s.create(suspended, func() {
		suspended.Status.Ready = ptr.To[int32](0)
		suspended.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", LastTransitionTime: s.ago(time.Minute)}}
	})

	s.create(&batchv1.Job{ObjectMeta: meta("new"), Spec: jobSpec()}, nil)

	cj := &batchv1.CronJob{ObjectMeta: meta("nightly"), Spec: batchv1.CronJobSpec{
		Schedule: "0 3 * * *", TimeZone: ptr.To("Etc/UTC"), Suspend: ptr.To(true),
		JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec()},
	}}
	cj.Spec.JobTemplate.Spec.Selector = nil
	s.create(cj, func() {
		cj.Status.LastScheduleTime = ptr.To(s.ago(26 * time.Hour))
		cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", Namespace: seedNamespace, Name: "nightly-1", APIVersion: "batch/v1"}}
	})
	s.create(&batchv1.CronJob{ObjectMeta: meta("often"), Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec()}}}, nil)
}

func (s *seeder) events() {
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: seedNamespace, Name: "crashloop", APIVersion: "v1", FieldPath: "spec.containers{app}"}
	s.create(&corev1.Event{
		ObjectMeta: meta("crashloop.1"), InvolvedObject: pod, Reason: "BackOff", Message: "Back-off restarting failed container app  \n", Type: corev1.EventTypeWarning,
		FirstTimestamp: s.ago(20 * time.Minute), LastTimestamp: s.ago(30 * time.Second), Count: 42,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-ready"},
	}, nil)
	s.create(&corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "singleton", Namespace: metav1.NamespaceDefault}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: ""}, Reason: "Rebooted", Message: "rebooted", Type: corev1.EventTypeNormal,
		FirstTimestamp: s.ago(3 * time.Hour), ReportingController: "example.com/controller",
	}, nil)
	s.create(&corev1.Event{
		ObjectMeta: meta("series"), InvolvedObject: pod, Reason: "Pulling", Message: "pulling image", Type: corev1.EventTypeNormal,
		EventTime: s.microAgo(15 * time.Minute), Series: &corev1.EventSeries{Count: 3, LastObservedTime: s.microAgo(4 * time.Minute)},
		ReportingController: "kubelet", ReportingInstance: "node-ready", Action: "Pull",
	}, nil)
	s.create(&eventsv1.Event{
		ObjectMeta: meta("new-api"), EventTime: s.microAgo(7 * time.Minute), ReportingController: "example.com/scheduler", ReportingInstance: "scheduler-1",
		Action: "Scheduling", Reason: "FailedScheduling", Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: seedNamespace, Name: "pending"},
		Note: "0/3 nodes are available", Type: corev1.EventTypeWarning,
	}, nil)
	s.create(&eventsv1.Event{
		ObjectMeta: meta("new-api-series"), EventTime: s.microAgo(70 * time.Minute), ReportingController: "example.com/controller", ReportingInstance: "c-1",
		Action: "Sync", Reason: "Synced", Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: seedNamespace, Name: "web"},
		Note: "synced", Type: corev1.EventTypeNormal, Series: &eventsv1.EventSeries{Count: 12, LastObservedTime: s.microAgo(2 * time.Minute)},
	}, nil)

	s.create(&coordinationv1.Lease{ObjectMeta: meta("held"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-ready_1234"), LeaseDurationSeconds: ptr.To[int32](15)}}, nil)
	s.create(&coordinationv1.Lease{ObjectMeta: meta("free")}, nil)
}

func (s *seeder) networking() {
	ing := &networkingv1.Ingress{ObjectMeta: meta("web"), Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("nginx"),
		Rules: []networkingv1.IngressRule{
			{Host: "a.example.com"}, {Host: ""}, {Host: "b.example.com"}, {Host: "c.example.com"}, {Host: "d.example.com"},
		},
		TLS: []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}, SecretName: "tls"}},
	}}
	s.create(ing, func() {
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.9"}, {Hostname: "very-long-hostname-of-an-ingress.example.com"}}
	})
	s.create(&networkingv1.Ingress{ObjectMeta: meta("default-backend"), Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "clusterip", Port: networkingv1.ServiceBackendPort{Number: 80}}},
	}}, nil)
	s.create(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}}, Spec: networkingv1.IngressClassSpec{
		Controller: "example.com/nginx", Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
	}}, nil)
	s.create(&networkingv1.IngressClass{ObjectMeta: meta("plain"), Spec: networkingv1.IngressClassSpec{Controller: "example.com/plain"}}, nil)
	s.create(&networkingv1.NetworkPolicy{ObjectMeta: meta("web"), Spec: networkingv1.NetworkPolicySpec{PodSelector: *labelSelector()}}, nil)
	s.create(&networkingv1.NetworkPolicy{ObjectMeta: meta("all")}, nil)
}

func (s *seeder) cluster() {
	s.create(&rbacv1.Role{ObjectMeta: meta("reader"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, nil)
	s.create(&rbacv1.RoleBinding{ObjectMeta: meta("readers"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"}, Subjects: []rbacv1.Subject{
		{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}, {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"},
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}, {Kind: rbacv1.ServiceAccountKind, Namespace: seedNamespace, Name: "robot"},
	}}, nil)
	s.create(&rbacv1.ClusterRoleBinding{ObjectMeta: meta("printers-view"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Namespace: seedNamespace, Name: "robot"}, {Kind: rbacv1.ServiceAccountKind, Namespace: "other", Name: "robot2"},
	}}, nil)

	s.create(&schedulingv1.PriorityClass{ObjectMeta: meta("batch-low"), Value: -10, PreemptionPolicy: ptr.To(corev1.PreemptNever), Description: "low"}, nil)
	s.create(&schedulingv1.PriorityClass{ObjectMeta: meta("everything"), Value: 1000, GlobalDefault: true}, nil)
	s.create(&nodev1.RuntimeClass{ObjectMeta: meta("gvisor"), Handler: "runsc"}, nil)

	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: meta("web"), Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: labelSelector()}}
	s.create(pdb, func() {
		pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3, ObservedGeneration: 1}
	})
	s.create(&policyv1.PodDisruptionBudget{ObjectMeta: meta("db"), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("25%"))}}, nil)

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta("web"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    ptr.To[int32](2), MaxReplicas: 10,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("512Mi"))}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100"))}}},
		},
	}}
	s.create(hpa, func() {
		hpa.Status.CurrentReplicas = 3
		hpa.Status.DesiredReplicas = 3
		hpa.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](45), AverageValue: ptr.To(resource.MustParse("450m"))}}},
		}
	})
	hpaTwo := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta("two"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, MaxReplicas: 4,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("2k"))},
			}},
			{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))},
			}},
		},
	}}
	s.create(hpaTwo, func() {
		hpaTwo.Status.CurrentReplicas = 1
		hpaTwo.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "web"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "rps"}, Current: autoscalingv2.MetricValueStatus{Value: ptr.To(resource.MustParse("1500"))},
			}},
		}
	})
	s.create(&autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta("defaulted"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "defaulted"}, MaxReplicas: 3,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
			Name: corev1.ResourceCPU, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)},
		}}},
	}}, nil)

	ignore := ptr.To(admissionregistrationv1.Ignore)
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{
		APIGroups: []string{"nothing.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"},
	}}}
	clientConfig := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://webhook.example.com/hook")}
	s.create(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta("printers-mutating"), Webhooks: []admissionregistrationv1.MutatingWebhook{
		{Name: "a.example.com", ClientConfig: clientConfig, Rules: rules, FailurePolicy: ignore, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		{Name: "b.example.com", ClientConfig: clientConfig, Rules: rules, FailurePolicy: ignore, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}}, nil)
	s.create(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta("printers-validating"), Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "a.example.com", ClientConfig: clientConfig, Rules: rules, FailurePolicy: ignore, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}}, nil)
	matchNothing := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules[0]}}}
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta("printers-params"), Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		MatchConstraints: matchNothing,
		Validations:      []admissionregistrationv1.Validation{{Expression: "true"}, {Expression: "1 == 1"}},
	}}, nil)
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta("printers-plain"), Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: matchNothing, Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
	}}, nil)
	deny := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("printers-named"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "printers-params", ValidationActions: deny,
		ParamRef: &admissionregistrationv1.ParamRef{Name: "config", Namespace: seedNamespace, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
	}}, nil)
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("printers-any-namespace"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "printers-params", ValidationActions: deny,
		ParamRef: &admissionregistrationv1.ParamRef{Name: "config", ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
	}}, nil)
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("printers-selector"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "printers-params", ValidationActions: deny,
		ParamRef: &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
	}}, nil)
	s.create(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("printers-unset"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "printers-plain", ValidationActions: deny,
	}}, nil)

	csrPEM := s.csr()
	s.create(&certificatesv1.CertificateSigningRequest{ObjectMeta: meta("printers-pending"), Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: csrPEM, SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To[int32](7200),
	}}, nil)
	denied := &certificatesv1.CertificateSigningRequest{ObjectMeta: meta("printers-denied"), Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: csrPEM, SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
	}}
	s.create(denied, nil)
	if s.err == nil {
		denied.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "No"}}
		if err := s.c.SubResource("approval").Update(s.ctx, denied); err != nil {
			s.err = fmt.Errorf("deny csr: %w", err)
		}
	}
	failedCSR := &certificatesv1.CertificateSigningRequest{ObjectMeta: meta("printers-failed"), Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: csrPEM, SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
	}}
	s.create(failedCSR, func() {
		failedCSR.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerError"}}
	})
}

// csr returns a PEM certificate signing request.
func (s *seeder) csr() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		s.err = err
		return nil
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "printers"}}, key)
	if err != nil {
		s.err = err
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// quotas come last: kube-apiserver's admission refuses objects that a
// quota without status counts.
func (s *seeder) quotas() {
	quota := &corev1.ResourceQuota{ObjectMeta: meta("quota"), Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("1500m"), corev1.ResourceLimitsMemory: resource.MustParse("2Gi"),
		corev1.ResourceLimitsCPU: resource.MustParse("2"), "count/deployments.apps": resource.MustParse("5"),
	}}}
	s.create(quota, func() {
		quota.Status.Hard = quota.Spec.Hard
		quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3"), corev1.ResourceRequestsCPU: resource.MustParse("500m"), corev1.ResourceLimitsMemory: resource.MustParse("1024Mi")}
	})
	s.create(&corev1.ResourceQuota{ObjectMeta: meta("unsynced"), Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}, nil)
}
