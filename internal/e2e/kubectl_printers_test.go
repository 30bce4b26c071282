package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// printersConfig caches every built-in type whose kubectl output the test
// compares, in every namespace.
const printersConfig = `
resources:
  - resource: pods
  - resource: nodes
  - resource: services
  - resource: endpointslices.discovery.k8s.io
  - resource: configmaps
  - resource: secrets
  - resource: namespaces
  - resource: deployments.apps
  - resource: replicasets.apps
  - resource: statefulsets.apps
  - resource: daemonsets.apps
  - resource: jobs.batch
  - resource: events
  - resource: leases.coordination.k8s.io
`

// age is a kubectl AGE cell ("5s", "3m2s", "<invalid>"): each server's
// clock and moment.
var age = regexp.MustCompile(`^(\d+[smhdy])+$|^<invalid>$`)

// cellsOf is kubectl's table output with AGE cells masked and columns
// compared by content, not by padding (a masked age can change a width).
func cellsOf(out string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fs := strings.Fields(line)
		for i, f := range fs {
			if age.MatchString(f) {
				fs[i] = "AGE"
			}
		}
		lines = append(lines, strings.Join(fs, " "))
	}
	return strings.Join(lines, "\n")
}

// TestKubectlPrinters compares kubectl get's default and -o wide output
// through informerd with the API server's, cell by cell (ages aside), for
// every built-in type of issue 34's list, with objects in several states:
// pending, running and completed pods, ready and not-ready nodes, a
// completed job; and kubectl get --field-selector on fields no index
// reads.
func TestKubectlPrinters(t *testing.T) {
	ns := "kubectl-printers"
	k := startKubeAPIConfig(t, ns, printersConfig, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}})
	ctx := context.Background()
	kube := k.kube
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))

	// Pods in three states, their status written as a kubelet would.
	for i, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded} {
		p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec:       corev1.PodSpec{NodeName: "printers-n1", Containers: []corev1.Container{{Name: "c", Image: "img"}, {Name: "d", Image: "img"}}},
		}, metav1.CreateOptions{})
		must(err)
		p.Status.Phase = phase
		if phase != corev1.PodPending {
			p.Status.PodIP, p.Status.PodIPs = fmt.Sprintf("10.0.0.%d", i), []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i)}}
			p.Status.StartTime = &now
			for _, c := range p.Spec.Containers {
				st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: phase == corev1.PodRunning, RestartCount: 2}
				if phase == corev1.PodRunning {
					st.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
				} else {
					st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
				}
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionStatus(map[bool]string{true: "True", false: "False"}[phase == corev1.PodRunning])}}
		}
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		must(err)
	}
	// A ready and a not-ready node.
	for i, ready := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse} {
		n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("printers-n%d", i+1),
			Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}}, metav1.CreateOptions{})
		must(err)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: now, LastTransitionTime: now}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i+1)}}
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian", KernelVersion: "6.1", ContainerRuntimeVersion: "containerd://2.0"}
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		must(err)
	}
	_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}, Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	must(err)
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	d, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}, metav1.CreateOptions{})
	must(err)
	d.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
	_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	must(err)
	_, err = kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}, metav1.CreateOptions{})
	must(err)
	jobTemplate := template
	jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
	for i, done := range []bool{true, false} {
		j, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job%d", i)},
			Spec: batchv1.JobSpec{Template: jobTemplate}}, metav1.CreateOptions{})
		must(err)
		if done {
			later := metav1.NewTime(now.Add(30 * time.Second))
			j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &now, CompletionTime: &later, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: later},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: later}}}
			_, err = kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			must(err)
		}
	}
	_, err = kube.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p1"},
		Reason: "Started", Message: "Started container c", Type: "Normal", Count: 3, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To[int32](15)}}, metav1.CreateOptions{})
	must(err)

	// No wait for the caches: kubectl's lists are consistent reads, which
	// informerd answers only once its cache is current.
	// Field selectors the API server serves, read from the cache.
	for _, args := range [][]string{
		{"get", "pods", "--field-selector", "status.phase=Running"},
		{"get", "pods", "--field-selector", "status.phase!=Succeeded,spec.nodeName=printers-n1", "-o", "wide"},
		{"get", "services", "--field-selector", "spec.type=NodePort"},
		{"get", "secrets", "--field-selector", "type=Opaque"},
		{"get", "events", "--field-selector", "involvedObject.name=p1,reason=Started"},
		{"get", "jobs", "--field-selector", "status.successful=1"},
		{"get", "nodes", "--field-selector", "spec.unschedulable=false,metadata.name=printers-n2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			direct := k.kubectl(t, k.direct, "", args...)
			cached := k.kubectl(t, k.cached, "", args...)
			direct.Stdout, cached.Stdout = cellsOf(direct.Stdout), cellsOf(cached.Stdout)
			sameAsDirect(t, "kubectl "+strings.Join(args, " "), direct, cached)
			if strings.Count(direct.Stdout, "\n") < 1 {
				t.Errorf("kubectl printed no rows: %q %q", direct.Stdout, direct.Stderr)
			}
		})
	}

	for _, typ := range []string{"pods", "nodes", "services", "endpointslices", "configmaps", "secrets", "namespaces", "deployments", "replicasets",
		"statefulsets", "daemonsets", "jobs", "events", "leases"} {
		for _, wide := range []bool{false, true} {
			args := []string{"get", typ}
			switch typ {
			case "nodes":
				args = append(args, "printers-n1", "printers-n2")
			case "namespaces":
				args = append(args, ns)
			}
			if wide {
				args = append(args, "-o", "wide")
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				direct := k.kubectl(t, k.direct, "", args...)
				cached := k.kubectl(t, k.cached, "", args...)
				direct.Stdout, cached.Stdout = cellsOf(direct.Stdout), cellsOf(cached.Stdout)
				sameAsDirect(t, "kubectl "+strings.Join(args, " "), direct, cached)
				if strings.Count(direct.Stdout, "\n") < 1 {
					t.Errorf("kubectl printed no rows: %q %q", direct.Stdout, direct.Stderr)
				}
			})
		}
	}
}
