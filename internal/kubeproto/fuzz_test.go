package kubeproto_test

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/informerd/informerd/internal/kubeproto"
)

// FuzzMessage feeds arbitrary JSON to Message and PartialMessage. They must
// not panic, and what they accept must be a message the generated code
// decodes. Encoding it again may differ once, where JSON can say what
// protobuf cannot (a null bytes value in a map becomes empty), but then no
// more. JSON from the API server has no such values: it writes what it
// decoded from protobuf.
func FuzzMessage(f *testing.F) {
	var kinds []schema.GroupVersionKind
	for _, obj := range fixtures() {
		kinds = append(kinds, gvkOf(obj))
		f.Add(uint8(len(kinds)-1), encodeJSON(f, obj))
	}
	f.Add(uint8(0), []byte(`{"metadata":{"creationTimestamp":"2026-01-02T03:04:05.999Z","managedFields":[{"fieldsV1":{"f:a":{}}}]}}`))
	f.Add(uint8(2), []byte(`{"binaryData":{"a":"","b":null},"data":null}`))
	f.Add(uint8(6), []byte(`{"eventTime":"2026-01-02T03:04:05.123456789Z","count":-1}`))
	f.Add(uint8(0), []byte(`{"spec":{"overhead":{"cpu":"1e3"},"containers":[{"resources":{"limits":{"memory":"0.5Gi"}}}]}}`))
	f.Add(uint8(4), []byte(`{"spec":{"ports":[{"targetPort":"x"},{"targetPort":8080}]}}`))
	f.Add(uint8(1), []byte(`null`))

	f.Fuzz(func(t *testing.T, kind uint8, json []byte) {
		gvk := kinds[int(kind)%len(kinds)]
		if msg, err := kubeproto.Message(gvk, json); err == nil {
			obj, err := scheme.Scheme.New(gvk)
			if err != nil {
				t.Fatal(err)
			}
			requireDecodes(t, obj.(protoMessage), msg)
			_ = kubeproto.Object(gvk, msg)
		}
		if msg, err := kubeproto.PartialMessage(json); err == nil {
			requireDecodes(t, &metav1.PartialObjectMetadata{}, msg)
		}
	})
}

type protoMessage interface {
	Reset()
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func requireDecodes(t *testing.T, into protoMessage, msg []byte) {
	t.Helper()
	remarshal := func(msg []byte) []byte {
		into.Reset()
		if err := into.Unmarshal(msg); err != nil {
			t.Fatalf("generated code cannot decode the message: %v\n%q", err, msg)
		}
		again, err := into.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return again
	}
	once := remarshal(msg)
	if twice := remarshal(once); !bytes.Equal(once, twice) {
		t.Fatalf("message changes each time it is decoded and encoded again:\n%q\n%q", once, twice)
	}
}
