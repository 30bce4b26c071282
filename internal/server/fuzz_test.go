package server_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// The fuzz targets below call the CacheService handlers directly, with every
// request field fuzzed, over caches filled in memory (no API server: a fuzz
// worker has no control plane). Calls run with a cancelled context, so that
// what would wait (min_resource_version, a watch's stream of changes) ends at
// once with CANCELED and every call is deterministic. Each checks that:
//   - nothing panics, and every error is a status with a code the request can
//     explain (never UNKNOWN or INTERNAL);
//   - a valid request succeeds, and its answer is what a model of the caches,
//     kept by the test without the indexer, says: Get the object by namespace
//     and name, List the matching objects in key order in pages of at most
//     the limit whose continue tokens lead through exactly them, Watch the
//     matching objects (send_initial_events) or the changes after
//     resource_version as the selection sees them;
//   - every response can be marshalled, as gRPC will.
// Only requests that marshal are tried: a gRPC server refuses the rest (a
// string that is not UTF-8) before any handler runs. The caches and their
// model are in fuzzfixture_test.go, the checks in fuzzcheck_test.go.

// selector builds a Selector from fuzzed fields; values are comma separated.
func selector(ns, labelSelector string, hasIndex bool, index, values string) *pb.Selector {
	sel := &pb.Selector{Namespace: ns, LabelSelector: labelSelector}
	if hasIndex {
		sel.Index = &pb.IndexSelector{Name: index}
		if values != "" {
			sel.Index.Values = strings.Split(values, ",")
		}
	}
	return sel
}

// sendable reports whether a client could send req: gRPC refuses a message
// that does not marshal (a string field that is not UTF-8).
func sendable(req proto.Message) bool {
	_, err := proto.Marshal(req)
	return err == nil
}

// forgedToken is a continue token made by hand, as a client could.
func forgedToken(rv, key string) string {
	b, _ := json.Marshal(map[string]string{"rv": rv, "k": key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// FuzzGet: Get by fuzzed resource, namespace and name; the object returned
// is the one with that namespace and name.
func FuzzGet(f *testing.F) {
	for _, s := range [][3]string{
		{"pods", "a", "p0"}, {"pods", "a", "p3"}, {"pods", "b", "q1"}, {"pods", "a", "nope"}, {"pods", "", "p0"},
		{"pods", "a", ""}, {"", "a", "p0"}, {"pod", "a", "p0"}, {"Pods", "a", "p0"}, {"nodes", "", "n0"}, {"nodes", "a", "n0"},
		{"gadgets.v1.example.com", "", "g"}, {"pods", "a/p0", ""}, {"pods", "a", "p0/"}, {"pods", "a/", "p0"}, {"pods", "c", "big"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fx := newFuzzFixture(f)
	f.Fuzz(func(t *testing.T, resource, namespace, name string) {
		req := &pb.GetRequest{Resource: resource, Namespace: namespace, Name: name}
		if sendable(req) {
			fx.checkGet(t, req)
		}
	})
}

// FuzzList: List with every field fuzzed, continue tokens both forged and
// the server's own (followed to the last page).
func FuzzList(f *testing.F) {
	type seed struct {
		resource, ns, labels string
		hasIndex             bool
		index, values        string
		limit                int64
		token                string
		forge                bool
		tokenRV, tokenKey    string
		mrv                  string
	}
	for _, s := range []seed{
		{resource: "pods"},
		{resource: "pods", limit: 100},
		{resource: "pods", limit: 1, labels: "app=web"},
		{resource: "pods", ns: "a", limit: 3},
		{resource: "pods", hasIndex: true, index: "node", values: "n0,n1", labels: "app in (web,db)"},
		{resource: "pods", hasIndex: true, index: "image", values: "web:1,web:2,db:1"},
		{resource: "pods", hasIndex: true, index: "app", values: ","},
		{resource: "pods", hasIndex: true, index: "namespace", values: "a,c", limit: 2},
		{resource: "pods", labels: "!tier,example.com/role!=y"},
		{resource: "pods", hasIndex: true, index: "zone", values: "a"},
		{resource: "pods", hasIndex: true, index: "node"},
		{resource: "pods", labels: "a in ("},
		{resource: "pods", limit: -1},
		{resource: "pods", limit: 1 << 62},
		{resource: "pods", mrv: "25"},
		{resource: "pods", mrv: "26"},
		{resource: "pods", mrv: "yesterday"},
		{resource: "pods", token: "garbage"},
		{resource: "pods", forge: true, tokenRV: "25", tokenKey: "a/p1"},
		{resource: "pods", forge: true, tokenRV: "22", tokenKey: "a/p0", limit: 3},
		{resource: "pods", forge: true, tokenRV: "21", tokenKey: ""},
		{resource: "pods", forge: true, tokenRV: "99", tokenKey: "b"},
		{resource: "pods", forge: true, tokenRV: "x", tokenKey: "a"},
		{resource: "pods", forge: true, tokenRV: "", tokenKey: "a"},
		{resource: "pods", forge: true, tokenRV: "023", tokenKey: "a/p0", hasIndex: true, index: "node", values: "n0"},
		{resource: "nodes", labels: "zone=a"},
		{resource: "nodes", hasIndex: true, index: "namespace", values: ""},
		{resource: "gadgets.v1.example.com"},
		{resource: "widgets"},
		{resource: ""},
	} {
		f.Add(s.resource, s.ns, s.labels, s.hasIndex, s.index, s.values, s.limit, s.token, s.forge, s.tokenRV, s.tokenKey, s.mrv)
	}
	fx := newFuzzFixture(f)
	f.Fuzz(func(t *testing.T, resource, ns, labelSelector string, hasIndex bool, index, values string, limit int64, token string, forge bool, tokenRV, tokenKey, mrv string) {
		if forge {
			token = forgedToken(tokenRV, tokenKey)
		}
		req := &pb.ListRequest{Resource: resource, Selector: selector(ns, labelSelector, hasIndex, index, values), Limit: limit, ContinueToken: token, MinResourceVersion: mrv}
		if sendable(req) {
			fx.checkList(t, req)
		}
	})
}

// FuzzWatch: Watch with every field fuzzed; the stream gets the initial
// objects or the replayed changes its selection sees, then ends with the
// call.
func FuzzWatch(f *testing.F) {
	type seed struct {
		resource, ns, labels string
		hasIndex             bool
		index, values        string
		rv                   string
		initial, bookmarks   bool
		policy               int32
	}
	for _, s := range []seed{
		{resource: "pods"},
		{resource: "pods", initial: true},
		{resource: "pods", initial: true, labels: "app=web", bookmarks: true},
		{resource: "pods", rv: "22"},
		{resource: "pods", rv: "21"},
		{resource: "pods", rv: "20"},
		{resource: "pods", rv: "25"},
		{resource: "pods", rv: "26"},
		{resource: "pods", rv: "026"},
		{resource: "pods", rv: "x"},
		{resource: "pods", rv: "22", hasIndex: true, index: "node", values: "n0"},
		{resource: "pods", rv: "22", labels: "app=web", policy: 1},
		{resource: "pods", rv: "22", labels: "tier=back", ns: "b"},
		{resource: "pods", rv: "22", hasIndex: true, index: "app", values: "api,db"},
		{resource: "pods", rv: "999", initial: true},
		{resource: "pods", rv: "1", initial: true, hasIndex: true, index: "image", values: "web:1"},
		{resource: "pods", hasIndex: true, index: "nope", values: "a"},
		{resource: "pods", labels: "a in ("},
		{resource: "pods", policy: -7},
		{resource: "nodes", initial: true, hasIndex: true, index: "namespace", values: ""},
		{resource: "nodes", rv: "30"},
		{resource: "gadgets.v1.example.com", initial: true},
		{resource: "deployments.apps"},
		{resource: ""},
	} {
		f.Add(s.resource, s.ns, s.labels, s.hasIndex, s.index, s.values, s.rv, s.initial, s.bookmarks, s.policy)
	}
	fx := newFuzzFixture(f)
	f.Fuzz(func(t *testing.T, resource, ns, labelSelector string, hasIndex bool, index, values, rv string, initial, bookmarks bool, policy int32) {
		req := &pb.WatchRequest{
			Resource: resource, Selector: selector(ns, labelSelector, hasIndex, index, values), ResourceVersion: rv,
			SendInitialEvents: initial, AllowBookmarks: bookmarks, SlowConsumerPolicy: pb.SlowConsumerPolicy(policy),
		}
		if sendable(req) {
			fx.checkWatch(t, req)
		}
	})
}

// FuzzRequestWire decodes fuzzed bytes as each method's request message, as
// the gRPC server does before calling the handler (ListResourcesRequest
// included, unknown fields and all), and checks the call like the targets
// above.
func FuzzRequestWire(f *testing.F) {
	for _, r := range []proto.Message{
		&pb.GetRequest{Resource: "pods", Namespace: "a", Name: "p1"},
		&pb.ListRequest{Resource: "pods", Selector: selector("a", "app=web", true, "node", "n0,n1"), Limit: 2},
		&pb.ListRequest{Resource: "pods", ContinueToken: forgedToken("23", "a/p1"), MinResourceVersion: "23"},
		&pb.WatchRequest{Resource: "pods", Selector: selector("", "app", true, "image", "web:1"), ResourceVersion: "22", AllowBookmarks: true},
		&pb.WatchRequest{Resource: "nodes", SendInitialEvents: true, SlowConsumerPolicy: pb.SlowConsumerPolicy_SLOW_CONSUMER_POLICY_COALESCE},
		&pb.ListResourcesRequest{},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		for m := range uint8(4) {
			f.Add(m, b)
		}
	}
	f.Add(uint8(3), []byte{0x0a, 0x04, 'p', 'o', 'd', 's', 0xf8, 0x01, 0x01})
	fx := newFuzzFixture(f)
	f.Fuzz(func(t *testing.T, method uint8, data []byte) {
		var req proto.Message
		switch method % 4 {
		case 0:
			req = &pb.GetRequest{}
		case 1:
			req = &pb.ListRequest{}
		case 2:
			req = &pb.WatchRequest{}
		case 3:
			req = &pb.ListResourcesRequest{}
		}
		if proto.Unmarshal(data, req) != nil {
			return // refused by gRPC before the handler
		}
		switch r := req.(type) {
		case *pb.GetRequest:
			fx.checkGet(t, r)
		case *pb.ListRequest:
			fx.checkList(t, r)
		case *pb.WatchRequest:
			fx.checkWatch(t, r)
		case *pb.ListResourcesRequest:
			fx.checkListResources(t, r)
		}
	})
}
