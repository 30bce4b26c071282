package kubeproto_test

import (
	"bytes"
	"errors"
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

// FuzzMessageDecoders: Message and PartialMessage decode JSON with a faster
// decoder than kube-apiserver's; for every kind and any JSON they must
// accept exactly what the API server's decoder accepts and make the same
// message of it.
func FuzzMessageDecoders(f *testing.F) {
	var kinds []schema.GroupVersionKind
	for _, obj := range fixtures() {
		kinds = append(kinds, gvkOf(obj))
		f.Add(uint8(len(kinds)-1), encodeJSON(f, obj))
	}
	for _, seed := range decoderSeeds {
		f.Add(seed.kind, []byte(seed.json))
	}
	f.Fuzz(func(t *testing.T, kind uint8, json []byte) {
		gvk := kinds[int(kind)%len(kinds)]
		requireSameMessage(t, gvk, json)
	})
}

// decoderSeeds are JSON where encoding/json's semantics are easy to miss:
// names in another case, duplicate names, nulls, invalid UTF-8, escapes,
// base64 with newlines, numbers in every shape, and the wrong types.
var decoderSeeds = []struct {
	kind uint8
	json string
}{
	{0, `{"Metadata":{"name":"a"},"metadata":{"Name":"b","namespace":"n"}}`},
	{0, `{"metadata":{"name":"a","name":"b"},"kind":"Pod","kind":"Pod"}`},
	{0, `{"metadata":{"name":"\xff\u00e9\ud800","labels":{"a":null}},"spec":null}`},
	{0, "{\"metadata\":{\"name\":\"\xff\xfe\"}}"},
	{0, `{"metadata":{"creationTimestamp":null,"deletionTimestamp":null,"generation":1.0}}`},
	{0, `{"metadata":{"generation":1e2}}`},
	{0, `{"metadata":{"generation":"1"}}`},
	{0, `{"metadata":{"generation":9223372036854775808}}`},
	{0, `{"metadata":{"creationTimestamp":""}}`},
	{0, `{"spec":{"containers":[null,{"name":"x","ports":[{"containerPort":80.5}]}]}}`},
	{0, `{"spec":{"terminationGracePeriodSeconds":null,"containers":{}}}`},
	{0, `{"metadata":{"managedFields":[{"fieldsV1":{"f:a":{"f:b":[1,2.5,"x",null,true]}}}]}}`},
	{2, `{"binaryData":{"a":"aGVs\nbG8=","b":"aGVsbG8","c":"!"}}`},
	{2, `{"binaryData":{"a":[104,105]}}`},
	{3, `{"data":{"a":"aGVsbG8=\r\n","b":""},"stringData":{"c":"d"},"immutable":null}`},
	{5, `{"spec":{"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},"replicas":null}}`},
	{10, `{"spec":{"backoffLimit":6,"activeDeadlineSeconds":-1,"completionMode":"Indexed"}}`},
	{0, `{"spec":{"overhead":{"cpu":1.5,"memory":"1Gi"}}}`},
	{4, `{"spec":{"ports":[{"targetPort":1.5},{"port":"80"}]}}`},
	{0, `{"apiVersion":"v1","kind":"pod"}`},
	{0, `{"apiVersion":"V1","kind":"Pod"}`},
	{0, `{"metadata":{}} trailing`},
	{0, `{"metadata":{}}{"metadata":{}}`},
	{0, ` {"metadata":{"name":"a"}} `},
	{0, `{"metadata":{"name":"a"},}`},
	{0, `[]`},
	{0, `"pod"`},
	{0, ``},
	{6, `{"eventTime":"2026-01-02T03:04:05Z","series":{"lastObservedTime":"2026-01-02T03:04:05.1Z"}}`},
	{6, `{"eventTime":"2026-01-02 03:04:05Z"}`},
	// The transcoder's own corners: names escaped or twice, map keys
	// twice, an inlined struct (a volume's source), null everywhere,
	// integers at their ranges, times with offsets and fractions.
	{0, `{"metadata":{"na\u006de":"a","labels":{"k":"1","k":"2"}}}`},
	{0, `{"metadata":{"labels":{"b":"1","a":"2","\u0061b":"3"},"annotations":{}}}`},
	{0, `{"spec":{"containers":[],"containers":null}}`},
	{0, `{"spec":{"volumes":[{"name":"v","configMap":{"name":"c","defaultMode":420}},{"secret":null,"name":"w"},null,{}]}}`},
	{0, `{"spec":{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"},"emptyDir":{}}]}}`},
	{0, `{"spec":{"priority":-2147483648,"activeDeadlineSeconds":-9223372036854775808,"hostNetwork":false}}`},
	{0, `{"spec":{"priority":2147483648}}`},
	{0, `{"spec":{"priority":-0,"securityContext":{"runAsUser":-1,"supplementalGroups":[1,-1,null]}}}`},
	{0, `{"metadata":{"creationTimestamp":"2026-01-02T03:04:05+02:00","deletionTimestamp":"2026-01-02T03:04:05.123456789-07:30"}}`},
	{0, `{"metadata":{"creationTimestamp":"0001-01-01T00:00:00Z","deletionTimestamp":"0001-01-01T00:00:00Z"}}`},
	{0, `{"metadata":{"creationTimestamp":"1969-12-31T23:59:59.5Z"}}`},
	{0, `{"spec":{"containers":[{"resources":{"limits":{"cpu":"0.1","memory":"1.5Gi"},"requests":{"cpu":"0.1"}}}]}}`},
	{0, `{"spec":{"overhead":{"cpu":null}}}`},
	{3, `{"data":{"a":"YQ","b":"YWI=","c":"","d":null,"e":"YW\u004a="}}`},
	{4, `{"spec":{"ports":[{"targetPort":"http","port":80},{"targetPort":0},{"targetPort":null}]}}`},
	{0, `{"kind":null,"apiVersion":null,"metadata":null}`},
	{0, `{"kind":"Pod","apiVersion":"v1","spec":{"nodeSelector":null,"tolerations":[{"tolerationSeconds":null}]}}`},
	{1, `{"status":{"capacity":{"pods":"110"},"images":[{"names":["a","b"],"sizeBytes":1}],"nodeInfo":{}}}`},
}

// requireSameMessage fails unless Message and the API server's decoder
// both refuse json, or both accept it and make the same message.
func requireSameMessage(t *testing.T, gvk schema.GroupVersionKind, json []byte) {
	t.Helper()
	want, wantErr := kubeproto.MessageAPIServer(gvk, json)
	got, err := kubeproto.Message(gvk, json)
	requireSame(t, gvk.Kind, json, got, want, err, wantErr)
	if got, err := kubeproto.Transcode(gvk, json); !errors.Is(err, kubeproto.ErrTranscode) {
		requireSame(t, "transcoded "+gvk.Kind, json, got, want, err, wantErr)
	}
	want, wantErr = kubeproto.PartialMessageAPIServer(json)
	got, err = kubeproto.PartialMessage(json)
	requireSame(t, "PartialObjectMetadata of "+gvk.Kind, json, got, want, err, wantErr)
}

func requireSame(t *testing.T, what string, json, got, want []byte, err, wantErr error) {
	t.Helper()
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("%s %q: the fast decoder's error %v, the API server decoder's %v", what, json, err, wantErr)
	case err == nil && !bytes.Equal(got, want):
		t.Fatalf("%s %q: messages differ:\n%q\n%q", what, json, got, want)
	}
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
