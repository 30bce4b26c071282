package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/object"
)

// TestEncodedMatchesProto: the field numbers codec.go writes are the
// generated code's.
func TestEncodedMatchesProto(t *testing.T) {
	for _, f := range []struct {
		msg  proto.Message
		name protoreflect.Name
		num  protoreflect.FieldNumber
	}{
		{&pb.WatchResponse{}, "type", watchType},
		{&pb.WatchResponse{}, "object", watchObject},
		{&pb.WatchResponse{}, "resource_version", watchResourceVersion},
		{&pb.ListResponse{}, "objects", listObjects},
		{&pb.ListResponse{}, "resource_version", listResourceVersion},
		{&pb.ListResponse{}, "continue_token", listContinueToken},
		{&pb.GetResponse{}, "object", getObject},
	} {
		d := f.msg.ProtoReflect().Descriptor()
		if got := d.Fields().ByName(f.name).Number(); got != f.num {
			t.Errorf("%s.%s is field %d, codec.go writes %d", d.Name(), f.name, got, f.num)
		}
	}
}

// testObject is a cached object and the informerd.v1.Object the generated
// code would send for it.
type testObject struct {
	name string
	obj  *object.Object
	want *pb.Object
}

// testObjects are objects of every shape: built by hand and by the Encoder
// (whose JSON is a view of a larger buffer), with fields or JSON missing,
// and one large enough for multi-byte lengths.
func testObjects(t *testing.T) []testObject {
	t.Helper()
	enc, err := object.NewEncoder(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := enc.EncodeUnstructured(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "ns", "name": "cm", "uid": "u-2", "resourceVersion": "8"},
		"data":     map[string]any{"k": "v"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`{"data":"` + strings.Repeat("x", 20<<10) + `"}`)
	return []testObject{
		{"pod", (&object.Object{Namespace: "ns", Name: "p", UID: "u-1", ResourceVersion: "7"}).WithJSON([]byte(`{"kind":"Pod"}`)),
			&pb.Object{Namespace: "ns", Name: "p", Uid: "u-1", ResourceVersion: "7", Json: []byte(`{"kind":"Pod"}`)}},
		{"built by the Encoder", encoded,
			&pb.Object{Namespace: "ns", Name: "cm", Uid: "u-2", ResourceVersion: "8", Json: jsonOf(encoded)}},
		{"empty", &object.Object{}, &pb.Object{}},
		{"only a name", &object.Object{Name: "n"}, &pb.Object{Name: "n"}},
		{"only JSON", (&object.Object{}).WithJSON([]byte("{}")), &pb.Object{Json: []byte("{}")}},
		{"large", (&object.Object{Name: "big"}).WithJSON(big), &pb.Object{Name: "big", Json: big}},
	}
}

// TestWatchEvent: what the codec sends for a Watch event decodes to the
// message the generated code would have marshaled, and shares the object's
// JSON instead of copying it.
func TestWatchEvent(t *testing.T) {
	type event struct {
		name string
		typ  pb.EventType
		obj  *object.Object
		rv   string
		want *pb.WatchResponse
	}
	tests := []event{
		{"bookmark", pb.EventType_EVENT_TYPE_BOOKMARK, nil, "12",
			&pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_BOOKMARK, ResourceVersion: "12"}},
		{"initial events end", pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, nil, "12",
			&pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, ResourceVersion: "12"}},
		{"nothing", pb.EventType_EVENT_TYPE_UNSPECIFIED, nil, "", &pb.WatchResponse{}},
	}
	objs := testObjects(t)
	for _, typ := range []pb.EventType{pb.EventType_EVENT_TYPE_ADDED, pb.EventType_EVENT_TYPE_MODIFIED, pb.EventType_EVENT_TYPE_DELETED} {
		for _, o := range objs {
			tests = append(tests, event{typ.String() + " " + o.name, typ, o.obj, "9", &pb.WatchResponse{Type: typ, Object: o.want, ResourceVersion: "9"}})
		}
	}
	tests = append(tests,
		event{"no resource version", pb.EventType_EVENT_TYPE_ADDED, objs[0].obj, "",
			&pb.WatchResponse{Type: pb.EventType_EVENT_TYPE_ADDED, Object: objs[0].want}},
		event{"no type", pb.EventType_EVENT_TYPE_UNSPECIFIED, objs[0].obj, "9",
			&pb.WatchResponse{Object: objs[0].want, ResourceVersion: "9"}},
	)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := watchEvent(tc.typ, tc.obj, tc.rv)
			checkEncoded(t, m, err, tc.want, tc.obj)
		})
	}
}

// TestGetResponse: likewise for Get.
func TestGetResponse(t *testing.T) {
	for _, o := range testObjects(t) {
		t.Run(o.name, func(t *testing.T) {
			m, err := getResponse(o.obj)
			checkEncoded(t, m, err, &pb.GetResponse{Object: o.want}, o.obj)
		})
	}
}

// TestListPage: likewise for a List page.
func TestListPage(t *testing.T) {
	objs := testObjects(t)
	var all []*object.Object
	var want []*pb.Object
	for _, o := range objs {
		all, want = append(all, o.obj), append(want, o.want)
	}
	for _, tc := range []struct {
		name      string
		objs      []*object.Object
		rv, token string
		want      *pb.ListResponse
	}{
		{"empty", nil, "", "", &pb.ListResponse{}},
		{"no objects", nil, "40", "", &pb.ListResponse{ResourceVersion: "40"}},
		{"no objects, a token", nil, "40", "tok", &pb.ListResponse{ResourceVersion: "40", ContinueToken: "tok"}},
		{"one object", all[:1], "40", "", &pb.ListResponse{Objects: want[:1], ResourceVersion: "40"}},
		{"every shape", all, "40", "tok", &pb.ListResponse{Objects: want, ResourceVersion: "40", ContinueToken: "tok"}},
		{"empty objects", []*object.Object{{}, {}}, "40", "", &pb.ListResponse{Objects: []*pb.Object{{}, {}}, ResourceVersion: "40"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := listPage(tc.objs, tc.rv, tc.token)
			checkEncoded(t, m, err, tc.want, tc.objs...)
		})
	}
}

// checkEncoded fails unless m, sent by the codec, decodes to want in as
// many bytes as proto.Marshal would have written, with the JSON of each of
// objs shared, not copied.
func checkEncoded(t *testing.T, m *encoded, err error, want proto.Message, objs ...*object.Object) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	data, err := newCodec().Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	checkDecodes(t, data, want)
	for _, o := range objs {
		if o != nil && o.Len() > 0 && !shares(data, jsonOf(o)) {
			t.Errorf("the JSON of %q was copied, not shared", o.Name)
		}
	}
	// What callers in process get is what clients get.
	got, err := decoded(m, nil, want.ProtoReflect().New().Interface())
	if err != nil || !proto.Equal(want, got) {
		t.Errorf("decode = %v, %v; want %v", got, err, want)
	}
}

// checkDecodes fails unless data decodes to want, in as many bytes as
// proto.Marshal would have written.
func checkDecodes(t *testing.T, data mem.BufferSlice, want proto.Message) {
	t.Helper()
	b := data.Materialize()
	got := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatalf("the encoded message does not decode: %v", err)
	}
	if !proto.Equal(want, got) {
		t.Errorf("decoded message differs (-want +got):\n%s", cmp.Diff(want, got, protocmp.Transform()))
	}
	if n := proto.Size(want); len(b) != n {
		t.Errorf("encoded %d bytes, proto.Marshal writes %d", len(b), n)
	}
}

// shares reports whether one of data's pieces is b itself.
func shares(data mem.BufferSlice, b []byte) bool {
	for _, piece := range data {
		if d := piece.ReadOnlyData(); len(d) == len(b) && &d[0] == &b[0] {
			return true
		}
	}
	return false
}

// TestCodecPassesOthersToProto: any other message goes through grpc's
// proto codec, both ways.
func TestCodecPassesOthersToProto(t *testing.T) {
	c := newCodec()
	if c.Name() != "proto" {
		t.Errorf("Name() = %q: clients ask for \"proto\"", c.Name())
	}
	want := &pb.ListResourcesResponse{Resources: []*pb.ResourceInfo{{Name: "pods", Synced: true, ObjectCount: 3}}}
	data, err := c.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	checkDecodes(t, data, want)
	got := &pb.ListResourcesResponse{}
	if err := c.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(want, got) {
		t.Errorf("Unmarshal (-want +got):\n%s", cmp.Diff(want, got, protocmp.Transform()))
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Error("Marshal of a non-message succeeded")
	}
}

// jsonOf is o's JSON; the objects of these tests are hot.
func jsonOf(o *object.Object) []byte {
	b, err := o.Bytes()
	if err != nil {
		panic(err)
	}
	return b
}
