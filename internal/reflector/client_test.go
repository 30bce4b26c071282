package reflector

import (
	"errors"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/informerd/informerd/internal/object"
)

// decodeStream runs a watch body through the same decoders client-go's
// REST client builds from rawSerializer.
func decodeStream(t *testing.T, body string) ([]watch.EventType, []runtime.Object, error) {
	t.Helper()
	info := rawSerializer{}.SupportedMediaTypes()[0]
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(strings.NewReader(body)))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
	var types []watch.EventType
	var objs []runtime.Object
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return types, objs, err
		}
		types = append(types, typ)
		objs = append(objs, obj)
	}
}

func TestWatchStreamDecoding(t *testing.T) {
	big := strings.Repeat("x", 200<<10) // beyond the streaming decoder's first buffers and bufio's
	body := `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"1"},"spec":{"s":"` + big + `"}}}` + "\n" +
		"\n" + // a blank line is skipped
		`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"2","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}` + "\n" +
		`{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"b","resourceVersion":"3"}}}` // last line without a newline
	types, objs, err := decodeStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	want := []watch.EventType{watch.Added, watch.Bookmark, watch.Error, watch.Deleted}
	if len(types) != len(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Errorf("event %d type %s, want %s", i, types[i], want[i])
		}
	}
	a := objs[0].(*object.Raw)
	if a.Name != "a" || a.ResourceVersion != "1" || len(a.JSON) < 200<<10 {
		t.Errorf("ADDED object = %s/%s rv %s, %d bytes", a.Namespace, a.Name, a.ResourceVersion, len(a.JSON))
	}
	if b := objs[1].(*object.Raw); b.GetAnnotations()["k8s.io/initial-events-end"] != "true" || b.ResourceVersion != "2" {
		t.Errorf("BOOKMARK = %+v", b.ObjectMeta)
	}
	if s, ok := objs[2].(*metav1.Status); !ok || s.Code != 410 || s.Reason != metav1.StatusReasonExpired {
		t.Errorf("ERROR object = %#v, want a 410 Expired Status", objs[2])
	}
	if d := objs[3].(*object.Raw); d.Name != "b" {
		t.Errorf("DELETED object = %+v", d.ObjectMeta)
	}
}

func TestWatchStreamErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":           "hello\n",
		"no object":          `{"type":"ADDED"}` + "\n",
		"object not a value": `{"type":"ADDED","object":[]}` + "\n",
		"pretty-printed":     "{\n  \"type\": \"ADDED\",\n  \"object\": {}\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := decodeStream(t, body); err == nil || !strings.Contains(err.Error(), "watch event") {
				t.Errorf("err = %v, want a watch event decoding error", err)
			}
		})
	}
}

func TestResourcePath(t *testing.T) {
	for _, tt := range []struct {
		group, ns, want string
	}{
		{"", "", "/api/v1/pods"},
		{"", "kube-system", "/api/v1/namespaces/kube-system/pods"},
		{"apps", "", "/apis/apps/v1/pods"},
	} {
		gvr := schema.GroupVersionResource{Group: tt.group, Version: "v1", Resource: "pods"}
		if got := strings.Join(resourcePath(gvr, tt.ns), "/"); strings.ReplaceAll(got, "//", "/") != tt.want {
			t.Errorf("resourcePath(%q, %q) = %q, want %q", tt.group, tt.ns, got, tt.want)
		}
	}
}
