package kubeproto_test

import (
	"bytes"
	"errors"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/informerd/informerd/internal/kubeproto"
)

// servedKinds are kinds whose objects the transcoder must serve: the ones
// informers watch most. A change to a type that makes the transcoder give
// up on it fails here, instead of quietly sending every object through
// the typed path.
var servedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "Node"}, {Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "Event"}, {Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "PersistentVolume"},
	{Version: "v1", Kind: "PersistentVolumeClaim"}, {Version: "v1", Kind: "Endpoints"},
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}, {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "batch", Version: "v1", Kind: "Job"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
	{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
}

func TestTranscoderServes(t *testing.T) {
	for _, gvk := range servedKinds {
		if err := kubeproto.TranscoderServes(gvk); err != nil {
			t.Errorf("%s: %v", gvk, err)
		}
	}
	// Every fixture, the JSON encoding/json writes as the API server does,
	// is transcoded, not given up on.
	for _, obj := range fixtures() {
		gvk := gvkOf(obj)
		js := encodeJSON(t, obj)
		got, err := kubeproto.Transcode(gvk, js)
		if err != nil {
			t.Errorf("%s: %v", gvk, err)
			continue
		}
		want, err := kubeproto.MessageAPIServer(gvk, js)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: transcoded %q, typed %q (%v)", gvk, got, want, err)
		}
	}
}

// TestTranscoderAllKinds runs every built-in kind, filled at random as
// Kubernetes' round-trip tests fill them, through the transcoder: where it
// does not give up, its message must be the typed path's, byte for byte;
// where the typed path refuses the JSON, the transcoder must not accept it.
func TestTranscoderAllKinds(t *testing.T) {
	const perKind = 8
	fill := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(2), scheme.Codecs).NilChance(0.3).NumElements(0, 3).MaxDepth(8)
	var names []schema.GroupVersionKind
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if kubeproto.Supports(gvk) {
			names = append(names, gvk)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
	unserved := map[string]int{}
	var served, transcoded, gaveUp int
	for _, gvk := range names {
		if err := kubeproto.TranscoderServes(gvk); err != nil {
			unserved[err.Error()]++
			continue
		}
		served++
		for range perKind {
			js := randomJSON(t, fill, gvk)
			want, wantErr := kubeproto.MessageAPIServer(gvk, js)
			got, err := kubeproto.Transcode(gvk, js)
			if errors.Is(err, kubeproto.ErrTranscode) {
				gaveUp++
				continue
			}
			transcoded++
			requireSame(t, "transcoded "+gvk.String(), js, got, want, err, wantErr)
		}
	}
	var reasons []string
	for r, n := range unserved {
		reasons = append(reasons, r+" ×"+string(rune('0'+min(n, 9))))
	}
	sort.Strings(reasons)
	t.Logf("%d of %d kinds served; %d objects transcoded, %d given up on; not served:\n%s", served, len(names), transcoded, gaveUp, strings.Join(reasons, "\n"))
	if served < len(names)*9/10 {
		t.Errorf("the transcoder serves only %d of %d kinds", served, len(names))
	}
	if transcoded < 4*gaveUp {
		t.Errorf("the transcoder gave up on %d of %d objects", gaveUp, gaveUp+transcoded)
	}
}

// TestTranscoderFieldsV1 checks the transcoder's own rule for managedFields'
// field sets (a JSON value kept as it is) against FieldsV1's UnmarshalJSON
// and Marshal, for every kind of JSON value a field set may hold.
func TestTranscoderFieldsV1(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	for _, raw := range []string{
		`{"f:data":{".":{},"f:a":{}}}`, `{}`, `null`, `{ "f:data" : { } }`, `{"f:\u00e9":{}}`,
		`"text"`, `[1,{"a":null}]`, `0`, `true`, `{"k:{\"name\":\"web\"}":{".":{}}}`,
	} {
		js := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":` + raw + `}]}}`)
		want, err := kubeproto.MessageAPIServer(gvk, js)
		if err != nil {
			t.Fatalf("%s: typed path: %v", raw, err)
		}
		got, err := kubeproto.Transcode(gvk, js)
		if err != nil {
			t.Errorf("%s: transcoder gave up: %v", raw, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: transcoded %q, typed %q", raw, got, want)
		}
	}
}
