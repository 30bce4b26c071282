package kubeproto_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"

	"github.com/informerd/informerd/internal/kubeproto"
)

// client-go's serializers: the reference every test compares with.
var (
	jsonInfo  = serializerInfo(runtime.ContentTypeJSON)
	protoInfo = serializerInfo(runtime.ContentTypeProtobuf)
)

func serializerInfo(mediaType string) runtime.SerializerInfo {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		panic("client-go has no serializer for " + mediaType)
	}
	return info
}

func encode(t testing.TB, e runtime.Encoder, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := e.Encode(obj, &buf); err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func encodeJSON(t testing.TB, obj runtime.Object) []byte { return encode(t, jsonInfo.Serializer, obj) }

func encodeProto(t testing.TB, obj runtime.Object) []byte {
	return encode(t, protoInfo.Serializer, obj)
}

func decodeProto(t testing.TB, data []byte) runtime.Object {
	t.Helper()
	obj, _, err := protoInfo.Serializer.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("client-go cannot decode the protobuf: %v", err)
	}
	return obj
}

// requireSameBytes fails when got is not want, showing where they part.
func requireSameBytes(t testing.TB, what string, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-16)
	t.Fatalf("%s: bytes differ at offset %d (want %d bytes, got %d)\nwant ...%q\ngot  ...%q",
		what, i, len(want), len(got), want[lo:min(len(want), i+48)], got[lo:min(len(got), i+48)])
}

func gvkOf(obj runtime.Object) schema.GroupVersionKind { return obj.GetObjectKind().GroupVersionKind() }

func message(t testing.TB, gvk schema.GroupVersionKind, json []byte) []byte {
	t.Helper()
	msg, err := kubeproto.Message(gvk, json)
	if err != nil {
		t.Fatalf("Message(%s): %v", gvk, err)
	}
	return msg
}

func partialMessage(t testing.TB, json []byte) []byte {
	t.Helper()
	msg, err := kubeproto.PartialMessage(json)
	if err != nil {
		t.Fatalf("PartialMessage: %v", err)
	}
	return msg
}

func TestSupports(t *testing.T) {
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		want bool
	}{
		{name: "core", gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, want: true},
		{name: "group", gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, want: true},
		{name: "list", gvk: schema.GroupVersionKind{Version: "v1", Kind: "PodList"}, want: true},
		{name: "older version", gvk: schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1beta1", Kind: "Lease"}, want: true},
		{name: "custom resource", gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}},
		{name: "unknown kind in a built-in group", gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Widget"}},
		{name: "internal version", gvk: schema.GroupVersionKind{Version: runtime.APIVersionInternal, Kind: "Pod"}},
		{name: "no version", gvk: schema.GroupVersionKind{Kind: "Pod"}},
		{name: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubeproto.Supports(tt.gvk); got != tt.want {
				t.Errorf("Supports(%s) = %v, want %v", tt.gvk, got, tt.want)
			}
		})
	}
}

func TestMessageErrors(t *testing.T) {
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		json string
		want error // nil: any error
	}{
		{name: "custom resource", gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, json: `{}`, want: kubeproto.ErrUnsupported},
		{name: "other kind", gvk: pod, json: `{"apiVersion":"v1","kind":"Node"}`, want: kubeproto.ErrKindMismatch},
		{name: "other group", gvk: pod, json: `{"apiVersion":"apps/v1","kind":"Pod"}`, want: kubeproto.ErrKindMismatch},
		{name: "not JSON", gvk: pod, json: `{"metadata":`},
		{name: "wrong field type", gvk: pod, json: `{"metadata":{"name":7}}`},
		{name: "array", gvk: pod, json: `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kubeproto.Message(tt.gvk, []byte(tt.json))
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Message(%s, %s) error = %v, want %v", tt.gvk, tt.json, err, tt.want)
			}
		})
	}
}

// TestObject encodes each fixture's JSON and requires client-go's protobuf
// encoding of the same object, which then decodes to the same JSON.
func TestObject(t *testing.T) {
	for _, obj := range fixtures() {
		gvk := gvkOf(obj)
		t.Run(gvk.Kind+"."+gvk.Group, func(t *testing.T) {
			js := encodeJSON(t, obj)
			got := kubeproto.Object(gvk, message(t, gvk, js))
			requireSameBytes(t, "Object", encodeProto(t, obj), got)
			back := decodeProto(t, got)
			if diff := cmp.Diff(string(js), string(encodeJSON(t, back))); diff != "" {
				t.Errorf("decoded object differs, as JSON (-want +got):\n%s", diff)
			}
		})
	}
}

// typedList returns the list of items as client-go holds it, kind listGVK.
func typedList(t testing.TB, listGVK schema.GroupVersionKind, lm metav1.ListMeta, items []runtime.Object) runtime.Object {
	t.Helper()
	list, err := scheme.Scheme.New(listGVK)
	if err != nil {
		t.Fatal(err)
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	if err := meta.SetList(list, items); err != nil {
		t.Fatalf("SetList %s: %v", listGVK, err)
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatal(err)
	}
	acc.SetResourceVersion(lm.ResourceVersion)
	acc.SetContinue(lm.Continue)
	acc.SetRemainingItemCount(lm.RemainingItemCount)
	return list
}

var pageMeta = metav1.ListMeta{ResourceVersion: "4712", Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDcxMn0", RemainingItemCount: ptr.To[int64](5)}

func TestList(t *testing.T) {
	for _, obj := range fixtures() {
		gvk := gvkOf(obj)
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		t.Run(listGVK.Kind+"."+gvk.Group, func(t *testing.T) {
			second := obj.DeepCopyObject()
			acc, _ := meta.Accessor(second)
			acc.SetName(acc.GetName() + "-2")
			var items []runtime.Object
			var msgs [][]byte
			for _, item := range []runtime.Object{obj, second} {
				msgs = append(msgs, message(t, gvk, encodeJSON(t, item)))
				item = item.DeepCopyObject()
				item.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // list items have none
				items = append(items, item)
			}
			for _, lm := range []metav1.ListMeta{pageMeta, {ResourceVersion: "4712"}, {}} {
				want := typedList(t, listGVK, lm, items)
				got := kubeproto.List(listGVK, lm, msgs)
				requireSameBytes(t, "List", encodeProto(t, want), got)
				if diff := cmp.Diff(string(encodeJSON(t, want)), string(encodeJSON(t, decodeProto(t, got)))); diff != "" {
					t.Errorf("decoded list differs, as JSON (-want +got):\n%s", diff)
				}
			}
			empty := kubeproto.List(listGVK, pageMeta, nil)
			requireSameBytes(t, "empty List", encodeProto(t, typedList(t, listGVK, pageMeta, nil)), empty)
		})
	}
}

// TestListAllKinds checks the layout List assumes (ListMeta field 1, items
// field 2) against every list kind client-go knows.
func TestListAllKinds(t *testing.T) {
	tested := 0
	for listGVK := range scheme.Scheme.AllKnownTypes() {
		itemGVK := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
		if itemGVK.Kind == listGVK.Kind || !kubeproto.Supports(itemGVK) || !kubeproto.Supports(listGVK) {
			continue
		}
		if l, _ := scheme.Scheme.New(listGVK); !meta.IsListType(l) {
			continue
		}
		var items []runtime.Object
		var msgs [][]byte
		for _, name := range []string{"a", "b"} {
			item, _ := scheme.Scheme.New(itemGVK)
			acc, err := meta.Accessor(item)
			if err != nil {
				t.Fatalf("%s: %v", itemGVK, err)
			}
			acc.SetName(name)
			acc.SetLabels(map[string]string{"k": name})
			items = append(items, item)
			msgs = append(msgs, message(t, itemGVK, encodeJSON(t, item)))
		}
		want := encodeProto(t, typedList(t, listGVK, pageMeta, items))
		requireSameBytes(t, listGVK.String(), want, kubeproto.List(listGVK, pageMeta, msgs))
		tested++
	}
	if tested < 100 {
		t.Errorf("tested %d list kinds, want client-go's more than 100", tested)
	}
}

func TestWriteList(t *testing.T) {
	listGVK := schema.GroupVersionKind{Version: "v1", Kind: "PodList"}
	pod := fixtures()[0]
	msgs := [][]byte{message(t, gvkOf(pod), encodeJSON(t, pod)), {}, message(t, gvkOf(pod), encodeJSON(t, pod))}
	want := kubeproto.List(listGVK, pageMeta, msgs)

	var buf bytes.Buffer
	n, err := kubeproto.WriteList(&buf, listGVK, pageMeta, msgs)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("WriteList = %d, %v; want %d, nil", n, err, len(want))
	}
	requireSameBytes(t, "WriteList", want, buf.Bytes())

	for _, limit := range []int{0, 10, len(want) / 2, len(want) - 1} {
		w := &failingWriter{limit: limit}
		n, err := kubeproto.WriteList(w, listGVK, pageMeta, msgs)
		if !errors.Is(err, errWriterFull) || n != int64(w.n) {
			t.Errorf("WriteList to a writer failing after %d bytes = %d, %v; want %d, %v", limit, n, err, w.n, errWriterFull)
		}
	}
}

var errWriterFull = errors.New("writer full")

type failingWriter struct{ limit, n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		k := w.limit - w.n
		w.n = w.limit
		return k, errWriterFull
	}
	w.n += len(p)
	return len(p), nil
}

func TestPartialObjectMetadata(t *testing.T) {
	var items []runtime.Object
	var msgs [][]byte
	for _, obj := range fixtures() {
		js := encodeJSON(t, obj)
		msg := partialMessage(t, js)
		acc, _ := meta.Accessor(obj)
		for _, gv := range []schema.GroupVersion{metav1.SchemeGroupVersion, metav1beta1.SchemeGroupVersion} {
			gvk := gv.WithKind("PartialObjectMetadata")
			want := meta.AsPartialObjectMetadata(acc)
			want.SetGroupVersionKind(gvk)
			requireSameBytes(t, gvkOf(obj).Kind+" as "+gvk.String(), encodeProto(t, want), kubeproto.Object(gvk, msg))
		}
		items = append(items, obj)
		msgs = append(msgs, msg)
	}

	partials := func(gvk schema.GroupVersionKind) []metav1.PartialObjectMetadata {
		var out []metav1.PartialObjectMetadata
		for _, obj := range items {
			acc, _ := meta.Accessor(obj)
			p := meta.AsPartialObjectMetadata(acc)
			p.SetGroupVersionKind(gvk)
			out = append(out, *p)
		}
		return out
	}
	tests := []struct {
		name  string
		list  runtime.Object
		items [][]byte
	}{
		{name: "v1", items: msgs, list: &metav1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
			ListMeta: pageMeta, Items: partials(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")),
		}},
		{name: "v1beta1", items: msgs, list: &metav1beta1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1beta1", Kind: "PartialObjectMetadataList"},
			ListMeta: pageMeta, Items: partials(metav1beta1.SchemeGroupVersion.WithKind("PartialObjectMetadata")),
		}},
		{name: "v1beta1 empty", list: &metav1beta1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1beta1", Kind: "PartialObjectMetadataList"},
			ListMeta: pageMeta,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// client-go's scheme does not register these lists (the API
			// server's meta scheme does); the serializer encodes them anyway.
			want := encodeProto(t, tt.list)
			requireSameBytes(t, "PartialObjectMetadataList", want, kubeproto.List(gvkOf(tt.list), pageMeta, tt.items))
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		st   metav1.Status
	}{
		{name: "not found", st: metav1.Status{
			Status: metav1.StatusFailure, Message: `pods "web" not found`, Reason: metav1.StatusReasonNotFound,
			Details: &metav1.StatusDetails{Name: "web", Kind: "pods"}, Code: 404,
		}},
		{name: "expired", st: metav1.Status{
			Status: metav1.StatusFailure, Message: "too old resource version: 1 (4711)", Reason: metav1.StatusReasonExpired, Code: 410,
		}},
		{name: "invalid with causes", st: metav1.Status{
			ListMeta: metav1.ListMeta{ResourceVersion: "9"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Code: 422,
			Details: &metav1.StatusDetails{Group: "apps", Kind: "Deployment", Name: "web", RetryAfterSeconds: 2, Causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.template"},
			}},
		}},
		{name: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.st.DeepCopy()
			want.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			requireSameBytes(t, "Status", encodeProto(t, want), kubeproto.Status(&tt.st))
		})
	}
}

// watchEvent is an event as the test expects it back from client-go.
type watchEvent struct {
	Type   watch.EventType
	Object runtime.Object
}

// TestWatchFrame frames events as the API server does (its watchEncoder:
// the object with the negotiated serializer, the WatchEvent with the stream
// serializer, through the length-delimited framer), requires the same bytes,
// and decodes the stream with client-go's watch decoder.
func TestWatchFrame(t *testing.T) {
	var events []watchEvent
	for _, obj := range fixtures() {
		events = append(events, watchEvent{watch.Added, obj}, watchEvent{watch.Modified, obj}, watchEvent{watch.Deleted, obj})
	}
	bookmark := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "4713", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
	}
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Message: "too old resource version: 1 (4711)", Reason: metav1.StatusReasonExpired, Code: 410}
	events = append(events, watchEvent{watch.Bookmark, bookmark}, watchEvent{watch.Error, status})

	var want, got bytes.Buffer
	frames := framer.NewLengthDelimitedFrameWriter(&want)
	for _, e := range events {
		raw := encodeProto(t, e.Object)
		if _, err := frames.Write(encode(t, protoInfo.StreamSerializer.Serializer, &metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: raw}})); err != nil {
			t.Fatal(err)
		}

		var obj []byte
		if st, ok := e.Object.(*metav1.Status); ok {
			obj = kubeproto.Status(st)
		} else {
			obj = kubeproto.Object(gvkOf(e.Object), message(t, gvkOf(e.Object), encodeJSON(t, e.Object)))
		}
		got.Write(kubeproto.WatchFrame(string(e.Type), obj))
	}
	requireSameBytes(t, "watch stream", want.Bytes(), got.Bytes())

	dec := restwatch.NewDecoder(
		streaming.NewDecoder(framer.NewLengthDelimitedFrameReader(io.NopCloser(&got)), protoInfo.StreamSerializer.Serializer),
		protoInfo.Serializer)
	defer dec.Close()
	for i, e := range events {
		typ, obj, err := dec.Decode()
		if err != nil {
			t.Fatalf("event %d: client-go: %v", i, err)
		}
		wantJSON := encodeJSON(t, e.Object)
		if typ != e.Type {
			t.Errorf("event %d: type %s, want %s", i, typ, e.Type)
		}
		if diff := cmp.Diff(string(wantJSON), string(encodeJSON(t, obj))); diff != "" {
			t.Errorf("event %d (%s): object differs, as JSON (-want +got):\n%s", i, e.Type, diff)
		}
	}
	if _, _, err := dec.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want EOF", err)
	}
}

func TestWatchFrameNilObject(t *testing.T) {
	want := bytes.Buffer{}
	w := framer.NewLengthDelimitedFrameWriter(&want)
	ev := &metav1.WatchEvent{Type: "ADDED"}
	data, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	requireSameBytes(t, "frame of a nil object", want.Bytes(), kubeproto.WatchFrame("ADDED", nil))
}

func ExampleWatchFrame() {
	msg, err := kubeproto.Message(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"b"},"data":{"k":"v"}}`))
	if err != nil {
		panic(err)
	}
	obj := kubeproto.Object(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, msg)
	fmt.Printf("%q\n", kubeproto.WatchFrame("ADDED", obj))
	// Output:
	// "\x00\x00\x00B\n\x05ADDED\x129\n7k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1c\n\x12\n\x01a\x12\x00\x1a\x01b\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01k\x12\x01v\x1a\x00\"\x00"
}
