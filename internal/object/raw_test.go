package object

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/api/meta"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

func TestParseRaw(t *testing.T) {
	r, err := ParseRaw([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a\u0062","namespace":"ns","uid":"u","resourceVersion":"7",` +
		`"labels":{"app":"web"},"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != "Pod" || r.APIVersion != "v1" || r.Name != "ab" || r.Namespace != "ns" || r.UID != "u" || r.ResourceVersion != "7" {
		t.Errorf("ParseRaw = %+v %+v", r.TypeMeta, r.ObjectMeta)
	}
	// client-go's Reflector reads bookmarks' annotations through meta.Accessor.
	acc, err := meta.Accessor(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := acc.GetAnnotations()["k8s.io/initial-events-end"]; got != "true" {
		t.Errorf("annotation = %q, want true", got)
	}
	if got := acc.GetLabels(); !cmp.Equal(got, map[string]string{"app": "web"}) {
		t.Errorf("labels = %v", got)
	}
	for _, bad := range []string{`[]`, `{"metadata":{"name":5}}`, `{"kind":`, ``} {
		if _, err := ParseRaw([]byte(bad)); err == nil {
			t.Errorf("ParseRaw(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseRawList(t *testing.T) {
	l, err := ParseRawList([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c","remainingItemCount":3},` +
		`"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"}},{"kind":"Pod","apiVersion":"v1","metadata":{"name":"b"}},{}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion != "9" || l.Continue != "c" || l.RemainingItemCount == nil || *l.RemainingItemCount != 3 || len(l.Items) != 3 {
		t.Fatalf("list = %+v", l)
	}
	a := l.Items[0]
	if a.Kind != "Pod" || a.APIVersion != "v1" || a.Name != "a" || a.ResourceVersion != "5" {
		t.Errorf("item 0 = %+v %+v", a.TypeMeta, a.ObjectMeta)
	}
	// The item's own JSON now names its kind, as a watch event's does.
	back, err := ParseRaw(a.JSON)
	if err != nil || back.Kind != "Pod" || back.APIVersion != "v1" || back.Name != "a" {
		t.Errorf("item 0 JSON %s parses to %+v, %v", a.JSON, back, err)
	}
	if empty, err := ParseRaw(l.Items[2].JSON); err != nil || empty.Kind != "Pod" {
		t.Errorf("empty item JSON %s: %+v, %v", l.Items[2].JSON, empty, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil || len(items) != 3 {
		t.Errorf("meta.ExtractList = %d items, %v", len(items), err)
	}
	if _, err := ParseRawList([]byte(`{"items":[1]}`)); err == nil {
		t.Error("a list with a non-object item decoded")
	}
}

// TestWireMatchesProto holds the hand-written encoding to the generated
// message: field numbers, and what the proto library decodes.
func TestWireMatchesProto(t *testing.T) {
	fields := (&pb.Object{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[protoreflect.Name]protowire.Number{
		"namespace": fieldNamespace, "name": fieldName, "uid": fieldUID, "resource_version": fieldResourceVersion, "json": fieldJSON,
	} {
		if f := fields.ByName(name); f == nil || f.Number() != num {
			t.Errorf("field %s: generated %v, encoded as %d", name, f, num)
		}
	}
	for _, o := range []*Object{
		(&Object{Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "1"}).WithJSON([]byte(`{"a":1}`)),
		{Name: "cluster-scoped"},
		{},
	} {
		var got pb.Object
		wire, err := o.Wire()
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		want := &pb.Object{Namespace: o.Namespace, Name: o.Name, Uid: o.UID, ResourceVersion: o.ResourceVersion, Json: o.data}
		if !proto.Equal(&got, want) {
			t.Errorf("Wire decodes to %v, want %v", &got, want)
		}
	}
}

// TestRawWithoutJSON: a bookmark a client builds (pkg/client's, for a
// leaf informerd) is a Raw without JSON; client-go's Reflector reads the
// annotation that ends the initial events from it.
func TestRawWithoutJSON(t *testing.T) {
	r := &Raw{}
	r.SetResourceVersion("7")
	r.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
	r.SetLabels(map[string]string{"a": "b"})
	if got := r.GetAnnotations()["k8s.io/initial-events-end"]; got != "true" {
		t.Errorf("annotation of a Raw without JSON = %q, want true", got)
	}
	if got := r.GetLabels()["a"]; got != "b" {
		t.Errorf("label of a Raw without JSON = %q, want b", got)
	}
}
