package kubeproto_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/informerd/informerd/internal/kubeproto"
	"github.com/informerd/informerd/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	acceptJSON  = "application/json"
	acceptProto = "application/vnd.kubernetes.protobuf"
	acceptWatch = "application/vnd.kubernetes.protobuf;stream=watch"
)

func acceptPartial(kind string, gv schema.GroupVersion) string {
	return fmt.Sprintf("%s;as=%s;g=%s;v=%s", acceptProto, kind, gv.Group, gv.Version)
}

// apiServer sends raw requests to the test environment's kube-apiserver.
type apiServer struct {
	client *http.Client
	host   string
}

func newAPIServer(t *testing.T) apiServer {
	t.Helper()
	c, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	host, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return apiServer{client: c, host: host.Scheme + "://" + host.Host}
}

func (s apiServer) open(t *testing.T, ctx context.Context, path string, query url.Values, accept string) *http.Response {
	t.Helper()
	u := s.host + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp
}

// get returns the body and status code of a GET with this Accept header.
func (s apiServer) get(t *testing.T, path string, query url.Values, accept string) ([]byte, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := s.open(t, ctx, path, query, accept)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return body, resp.StatusCode
}

func (s apiServer) getOK(t *testing.T, path string, query url.Values, accept string) []byte {
	t.Helper()
	body, code := s.get(t, path, query, accept)
	if code != http.StatusOK {
		t.Fatalf("GET %s (%s): %d %s", path, accept, code, body)
	}
	return body
}

// served is one object created in the API server: its path and kind.
type served struct {
	path string
	gvk  schema.GroupVersionKind
}

// createObjects creates one object of each kind in namespace ns and
// returns where the API server serves them.
func createObjects(t *testing.T, ns string) []served {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	now := metav1.NewMicroTime(time.Now())
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "web", Image: "registry.example/web:1.2.3",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25"), corev1.ResourceMemory: resource.MustParse("1536Mi")}},
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: map[string]string{"note": "ünïcode ✓"}}
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	core := func(resource, name string, kind string) served {
		return served{path: "/api/v1/namespaces/" + ns + "/" + resource + "/" + name, gvk: schema.GroupVersionKind{Version: "v1", Kind: kind}}
	}
	group := func(gv schema.GroupVersion, resource, name, kind string) served {
		return served{path: "/apis/" + gv.String() + "/namespaces/" + ns + "/" + resource + "/" + name, gvk: gv.WithKind(kind)}
	}

	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	must("namespace", err)
	for _, name := range []string{"settings", "settings-2", "settings-3"} {
		_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: meta(name), Data: map[string]string{"a.yaml": "x: 1\n", "empty": ""},
			BinaryData: map[string][]byte{"blob": {0, 1, 2, 255}, "none": {}},
		}, metav1.CreateOptions{})
		must("configmap", err)
	}
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta("token"), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("hunter2"), "empty": {}}, StringData: map[string]string{"user": "admin"}}, metav1.CreateOptions{})
	must("secret", err)
	_, err = kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}, {Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)}},
	}}, metav1.CreateOptions{})
	must("service", err)
	_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta("web-1"), Spec: template.Spec}, metav1.CreateOptions{})
	must("pod", err)
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta("robot"), AutomountServiceAccountToken: ptr.To(false)}, metav1.CreateOptions{})
	must("serviceaccount", err)
	_, err = kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: meta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1.5Gi")}},
	}}, metav1.CreateOptions{})
	must("pvc", err)
	_, err = kube.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: meta("web-1.1812a3b4c5d6e7f8"),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1", APIVersion: "v1"},
		Reason:         "BackOff", Message: "Back-off restarting failed container", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-001"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3,
	}, metav1.CreateOptions{})
	must("core event", err)
	_, err = kube.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: meta("web.1812a3b4c5d6e7f9"), EventTime: now,
		ReportingController: "example.com/controller", ReportingInstance: "controller-0", Action: "Scale", Reason: "ScalingReplicaSet", Note: "Scaled up", Type: "Normal",
		Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "web"},
	}, metav1.CreateOptions{})
	must("events.k8s.io event", err)
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: func() corev1.PodTemplateSpec {
			t := *template.DeepCopy()
			t.Spec.RestartPolicy = corev1.RestartPolicyAlways
			return t
		}(),
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromString("25%"))}},
	}}, metav1.CreateOptions{})
	must("deployment", err)
	_, err = kube.AppsV1().ControllerRevisions(ns).Create(ctx, &appsv1.ControllerRevision{ObjectMeta: meta("web-1"), Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}`)}}, metav1.CreateOptions{})
	must("controllerrevision", err)
	_, err = kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: meta("migrate"), Spec: batchv1.JobSpec{Template: template, Suspend: ptr.To(true),
		PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}}}},
	}}, metav1.CreateOptions{})
	must("job", err)
	_, err = kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: meta("leader"), Spec: coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("node-001_6f1d2c3b"), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](2),
	}}, metav1.CreateOptions{})
	must("lease", err)
	_, err = kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: meta("web-abcde"), AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1"}, NodeName: ptr.To("node-" + ns)}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	must("endpointslice", err)
	_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta("reader"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	must("role", err)
	_, err = kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns, Labels: labels},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", Taints: []corev1.Taint{{Key: "example.com/dedicated", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	must("node", err)
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), "node-"+ns, metav1.DeleteOptions{}) })

	return []served{
		{path: "/api/v1/namespaces/" + ns, gvk: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}},
		{path: "/api/v1/nodes/node-" + ns, gvk: schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
		core("configmaps", "settings", "ConfigMap"),
		core("secrets", "token", "Secret"),
		core("services", "web", "Service"),
		core("pods", "web-1", "Pod"),
		core("serviceaccounts", "robot", "ServiceAccount"),
		core("persistentvolumeclaims", "data", "PersistentVolumeClaim"),
		core("events", "web-1.1812a3b4c5d6e7f8", "Event"),
		group(eventsv1.SchemeGroupVersion, "events", "web.1812a3b4c5d6e7f9", "Event"),
		group(appsv1.SchemeGroupVersion, "deployments", "web", "Deployment"),
		group(appsv1.SchemeGroupVersion, "controllerrevisions", "web-1", "ControllerRevision"),
		group(batchv1.SchemeGroupVersion, "jobs", "migrate", "Job"),
		group(coordinationv1.SchemeGroupVersion, "leases", "leader", "Lease"),
		group(discoveryv1.SchemeGroupVersion, "endpointslices", "web-abcde", "EndpointSlice"),
		group(rbacv1.SchemeGroupVersion, "roles", "reader", "Role"),
	}
}

func resourceVersion(t *testing.T, js []byte) string {
	t.Helper()
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Metadata.ResourceVersion
}

// TestAPIServer compares, byte for byte, what kube-apiserver sends in
// protobuf with what this package makes of the JSON it sends for the same
// request at the same resourceVersion.
func TestAPIServer(t *testing.T) {
	s := newAPIServer(t)
	ns := "kubeproto-apiserver"
	objects := createObjects(t, ns)

	t.Run("get", func(t *testing.T) {
		for _, o := range objects {
			t.Run(o.gvk.Kind+"."+o.gvk.Group, func(t *testing.T) {
				js := s.getOK(t, o.path, nil, acceptJSON)
				q := url.Values{"resourceVersion": {resourceVersion(t, js)}}
				got := kubeproto.Object(o.gvk, message(t, o.gvk, js))
				requireSameBytes(t, "GET "+o.path, s.getOK(t, o.path, q, acceptProto), got)

				partial := partialMessage(t, js)
				for _, gv := range []schema.GroupVersion{metav1.SchemeGroupVersion, metav1beta1.SchemeGroupVersion} {
					want := s.getOK(t, o.path, q, acceptPartial("PartialObjectMetadata", gv))
					requireSameBytes(t, "GET as PartialObjectMetadata "+gv.String(), want, kubeproto.Object(gv.WithKind("PartialObjectMetadata"), partial))
				}
			})
		}
	})

	t.Run("list", func(t *testing.T) {
		lists := []struct {
			name, path string
			itemGVK    schema.GroupVersionKind
			limit      string
		}{
			{name: "configmaps", path: "/api/v1/namespaces/" + ns + "/configmaps", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
			{name: "configmaps page", path: "/api/v1/namespaces/" + ns + "/configmaps", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, limit: "2"},
			{name: "pods in all namespaces", path: "/api/v1/pods", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}},
			{name: "secrets", path: "/api/v1/namespaces/" + ns + "/secrets", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}},
			{name: "namespaces page", path: "/api/v1/namespaces", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, limit: "1"},
			{name: "nodes", path: "/api/v1/nodes", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "Node"}},
			{name: "services", path: "/api/v1/namespaces/" + ns + "/services", itemGVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}},
			{name: "deployments", path: "/apis/apps/v1/deployments", itemGVK: appsv1.SchemeGroupVersion.WithKind("Deployment")},
			{name: "leases in all namespaces", path: "/apis/coordination.k8s.io/v1/leases", itemGVK: coordinationv1.SchemeGroupVersion.WithKind("Lease")},
			{name: "endpointslices", path: "/apis/discovery.k8s.io/v1/endpointslices", itemGVK: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")},
			{name: "events", path: "/apis/events.k8s.io/v1/namespaces/" + ns + "/events", itemGVK: eventsv1.SchemeGroupVersion.WithKind("Event")},
			{name: "empty", path: "/apis/batch/v1/namespaces/" + ns + "/cronjobs", itemGVK: batchv1.SchemeGroupVersion.WithKind("CronJob")},
		}
		for _, l := range lists {
			t.Run(l.name, func(t *testing.T) {
				q := url.Values{}
				if l.limit != "" {
					q.Set("limit", l.limit)
				}
				var list struct {
					Metadata metav1.ListMeta   `json:"metadata"`
					Items    []json.RawMessage `json:"items"`
				}
				if err := json.Unmarshal(s.getOK(t, l.path, q, acceptJSON), &list); err != nil {
					t.Fatal(err)
				}
				if l.limit != "" && list.Metadata.Continue == "" {
					t.Fatalf("a page of %s items has no continue token; the test needs more objects", l.limit)
				}
				q.Set("resourceVersion", list.Metadata.ResourceVersion)
				q.Set("resourceVersionMatch", "Exact")

				var msgs, partials [][]byte
				for _, item := range list.Items {
					msgs = append(msgs, message(t, l.itemGVK, item))
					partials = append(partials, partialMessage(t, item))
				}
				listGVK := l.itemGVK.GroupVersion().WithKind(l.itemGVK.Kind + "List")
				requireSameBytes(t, "LIST "+l.path, s.getOK(t, l.path, q, acceptProto), kubeproto.List(listGVK, list.Metadata, msgs))
				for _, gv := range []schema.GroupVersion{metav1.SchemeGroupVersion, metav1beta1.SchemeGroupVersion} {
					want := s.getOK(t, l.path, q, acceptPartial("PartialObjectMetadataList", gv))
					requireSameBytes(t, "LIST as PartialObjectMetadataList "+gv.String(), want, kubeproto.List(gv.WithKind("PartialObjectMetadataList"), list.Metadata, partials))
				}
			})
		}
	})

	t.Run("status", func(t *testing.T) {
		// An ERROR watch event carries the same Status; the API server
		// sends one only when etcd compacted past the watch's
		// resourceVersion, which a fresh test environment does not do.
		for _, tt := range []struct {
			path  string
			query url.Values
			code  int
		}{
			{path: "/api/v1/namespaces/" + ns + "/configmaps/missing", code: http.StatusNotFound},
			{path: "/apis/apps/v1/namespaces/" + ns + "/deployments/missing", code: http.StatusNotFound},
			{path: "/api/v1/namespaces/" + ns + "/configmaps", query: url.Values{"labelSelector": {"a b c"}}, code: http.StatusBadRequest},
		} {
			path := tt.path
			js, code := s.get(t, path, tt.query, acceptJSON)
			want, protoCode := s.get(t, path, tt.query, acceptProto)
			if code != tt.code || protoCode != tt.code {
				t.Fatalf("GET %s: %d and %d, want %d", path, code, protoCode, tt.code)
			}
			var st metav1.Status
			if err := json.Unmarshal(js, &st); err != nil {
				t.Fatal(err)
			}
			requireSameBytes(t, fmt.Sprintf("%d of %s", code, path), want, kubeproto.Status(&st))
		}
	})
}

// jsonEvent is a watch event of a JSON watch.
type jsonEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watches is a JSON and a protobuf watch of the same request.
type watches struct {
	json   *json.Decoder
	proto  io.Reader
	closes []io.Closer
}

func openWatches(t *testing.T, ctx context.Context, s apiServer, path string, q url.Values) *watches {
	t.Helper()
	q.Set("watch", "true")
	q.Set("timeoutSeconds", "60")
	jw := s.open(t, ctx, path, q, acceptJSON)
	pw := s.open(t, ctx, path, q, acceptWatch)
	w := &watches{json: json.NewDecoder(jw.Body), proto: pw.Body, closes: []io.Closer{jw.Body, pw.Body}}
	for _, resp := range []*http.Response{jw, pw} {
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			w.close()
			t.Fatalf("watch %s: %d %s", path, resp.StatusCode, body)
		}
	}
	return w
}

func (w *watches) close() {
	for _, c := range w.closes {
		_ = c.Close()
	}
}

// next returns the next event of each watch: the JSON one decoded, the
// protobuf one as its whole frame.
func (w *watches) next(t *testing.T) (jsonEvent, []byte) {
	t.Helper()
	var je jsonEvent
	if err := w.json.Decode(&je); err != nil {
		t.Fatalf("JSON watch: %v", err)
	}
	var frame []byte
	frame = append(frame, make([]byte, 4)...)
	if _, err := io.ReadFull(w.proto, frame); err != nil {
		t.Fatalf("protobuf watch: %v", err)
	}
	frame = append(frame, make([]byte, binary.BigEndian.Uint32(frame))...)
	if _, err := io.ReadFull(w.proto, frame[4:]); err != nil {
		t.Fatalf("protobuf watch: %v", err)
	}
	return je, frame
}

// frameOf is this package's frame of a JSON watch event.
func frameOf(t *testing.T, gvk schema.GroupVersionKind, e jsonEvent) []byte {
	t.Helper()
	if e.Type == "ERROR" {
		var st metav1.Status
		if err := json.Unmarshal(e.Object, &st); err != nil {
			t.Fatal(err)
		}
		return kubeproto.WatchFrame(e.Type, kubeproto.Status(&st))
	}
	return kubeproto.WatchFrame(e.Type, kubeproto.Object(gvk, message(t, gvk, e.Object)))
}

func TestAPIServerWatch(t *testing.T) {
	s := newAPIServer(t)
	ns := "kubeproto-watch"
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	path := "/api/v1/namespaces/" + ns + "/configmaps"

	{
		// A watch list: ADDED for each object, the BOOKMARK that ends them,
		// then the changes. Both watches must start from the same state, so
		// try again when a write elsewhere moved it between them.
		var w *watches
		for attempt := 0; ; attempt++ {
			w = openWatches(t, ctx, s, path, url.Values{"sendInitialEvents": {"true"}, "resourceVersionMatch": {"NotOlderThan"}, "allowWatchBookmarks": {"true"}})
			var same bool
			var types []string
			for range 3 { // a, b, the bookmark
				je, frame := w.next(t)
				types = append(types, je.Type)
				same = bytes.Equal(frame, frameOf(t, gvk, je))
				if !same {
					break
				}
			}
			if same {
				if fmt.Sprint(types) != "[ADDED ADDED BOOKMARK]" {
					t.Fatalf("initial events %v, want ADDED ADDED BOOKMARK", types)
				}
				break
			}
			w.close()
			if attempt == 3 {
				t.Fatal("initial events of the protobuf watch differ from the JSON watch's four times")
			}
		}
		defer w.close()

		cm, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"x": "1"}},
			BinaryData: map[string][]byte{"b": {0xff}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"k": "ünïcode ✓"}
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var types []string
		for len(types) < 3 {
			je, frame := w.next(t)
			if je.Type == "BOOKMARK" { // a periodic one, sent to each watch at its own time
				continue
			}
			types = append(types, je.Type)
			requireSameBytes(t, je.Type+" frame", frame, frameOf(t, gvk, je))
		}
		if fmt.Sprint(types) != "[ADDED MODIFIED DELETED]" {
			t.Errorf("events %v, want ADDED MODIFIED DELETED", types)
		}
	}

}
