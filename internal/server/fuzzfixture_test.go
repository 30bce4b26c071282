package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/server"
)

// fuzzConfig is the fuzz fixture's configuration: pods with indexes, a
// cluster-scoped resource, and one whose cache never syncs.
const fuzzConfig = `
resources:
  - resource: pods
    indexes:
      - {name: node, jsonpath: "{.spec.nodeName}"}
      - {name: image, jsonpath: "{.spec.containers[*].image}"}
      - {name: app, label: app}
  - resource: nodes
  - resource: gadgets.v1.example.com
history: {maxEvents: 3, maxAge: 24h}
`

// fuzzOptions: small pages, and a byte limit that the big pod fills alone.
var fuzzOptions = server.Options{DefaultPageSize: 2, MaxPageSize: 3, MaxPageBytes: 2500, WatchQueueLength: 10}

// spec describes one object of the fixture.
type spec struct {
	ns, name string
	labels   map[string]string
	node     string // no spec.nodeName when ""
	images   []string
	pad      int // bytes of annotation, to make the object big
}

func (s spec) unstructured(kind string, rv uint64) *unstructured.Unstructured {
	md := map[string]any{"name": s.name, "uid": "uid-" + s.ns + "-" + s.name, "resourceVersion": strconv.FormatUint(rv, 10)}
	if s.ns != "" {
		md["namespace"] = s.ns
	}
	if len(s.labels) > 0 {
		l := map[string]any{}
		for k, v := range s.labels {
			l[k] = v
		}
		md["labels"] = l
	}
	if s.pad > 0 {
		md["annotations"] = map[string]any{"pad": strings.Repeat("x", s.pad)}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": md}}
	if kind == "Pod" {
		sp := map[string]any{}
		if s.node != "" {
			sp["nodeName"] = s.node
		}
		var cs []any
		for i, img := range s.images {
			cs = append(cs, map[string]any{"name": fmt.Sprintf("c%d", i), "image": img})
		}
		sp["containers"] = cs
		u.Object["spec"] = sp
	}
	return u
}

// view is what the reference selection reads from an object's JSON.
type view struct {
	Metadata struct {
		Namespace, Name, UID string
		Labels               map[string]string
	}
	Spec struct {
		NodeName   *string
		Containers []struct{ Image string }
	}
}

func viewOf(t testing.TB, data []byte) view {
	t.Helper()
	var v view
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("object JSON %q: %v", data, err)
	}
	return v
}

// indexValues are the values the configured indexes give v.
func (v view) indexValues(index string) []string {
	switch index {
	case "namespace":
		return []string{v.Metadata.Namespace}
	case "node":
		if v.Spec.NodeName != nil {
			return []string{*v.Spec.NodeName}
		}
	case "image":
		var out []string
		for _, c := range v.Spec.Containers {
			out = append(out, c.Image)
		}
		return out
	case "app":
		if a, ok := v.Metadata.Labels["app"]; ok {
			return []string{a}
		}
	}
	return nil
}

// cached is one object of the model.
type cached struct {
	key  string
	json []byte
	view view
}

// change is one event of the model's history.
type change struct {
	typ       pb.EventType // ADDED, MODIFIED or DELETED, as the cache sees it
	rv        uint64
	prev, obj *cached // obj is the final state for DELETED
}

// model is what one resource's cache holds: its state at every RV with a
// change, and the changes its history keeps.
type model struct {
	name    string
	indexes []string
	synced  bool
	syncRV  uint64
	cur     uint64
	floor   uint64 // the oldest RV a watch may resume from
	initial map[string]*cached
	changes []change
	states  []map[string]*cached // after each change
}

func (m *model) stateAt(n uint64) map[string]*cached {
	s := m.initial
	for i, c := range m.changes {
		if c.rv <= n {
			s = m.states[i]
		}
	}
	return s
}

// sorted returns the objects of state that sel selects, by key.
func sorted(state map[string]*cached, sel refSelection) []*cached {
	var out []*cached
	for _, o := range state {
		if sel.matches(o.view) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// refSelection is the reference for a valid Selector.
type refSelection struct {
	ns     string
	labels labels.Selector
	index  string // "" for none
	values []string
	shard  apisharding.Selector // nil for none
}

func (r refSelection) matches(v view) bool {
	if r.ns != "" && v.Metadata.Namespace != r.ns {
		return false
	}
	if !r.labels.Matches(labels.Set(v.Metadata.Labels)) {
		return false
	}
	if r.shard != nil {
		ok, err := r.shard.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(v.Metadata.UID), Namespace: v.Metadata.Namespace}})
		if err != nil || !ok {
			return false
		}
	}
	if r.index == "" {
		return true
	}
	return slices.ContainsFunc(v.indexValues(r.index), func(s string) bool { return slices.Contains(r.values, s) })
}

// fuzzFixture is a Server over in-memory caches and their model.
type fuzzFixture struct {
	srv    *server.Server
	models map[string]*model
	order  []string // resources in configuration order
	// views holds every version of every object the caches ever held, by
	// its JSON.
	views map[string]view
}

func newFuzzFixture(t testing.TB) *fuzzFixture {
	t.Helper()
	c, err := config.Parse([]byte(fuzzConfig))
	if err != nil {
		t.Fatal(err)
	}
	// NewSet builds clients but contacts nobody; Lookup works by configured
	// name before Run, as BenchmarkWatchFanOut relies on.
	set, err := pipeline.NewSet(c, &rest.Config{Host: "http://127.0.0.1:1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fuzzFixture{models: map[string]*model{}, views: map[string]view{}}
	for _, p := range set.Served() {
		fx.order = append(fx.order, p.Configured())
		fx.models[p.Configured()] = &model{name: p.Configured(), indexes: p.Cache().IndexNames(), initial: map[string]*cached{}}
	}
	encoder := func(r config.Resource) *object.Encoder {
		var specs []object.IndexSpec
		for _, ix := range r.Indexes {
			specs = append(specs, object.IndexSpec{Name: ix.Name, Label: ix.Label, JSONPath: ix.JSONPath})
		}
		enc, err := object.NewEncoder(specs, true)
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	feed := func(p pipeline.Served, enc *object.Encoder, kind string, initial []spec, syncRV uint64, changes []func() (watch.EventType, spec)) {
		m := fx.models[p.Configured()]
		encode := func(s spec, rv uint64) (*object.Object, *cached) {
			o, err := enc.EncodeUnstructured(s.unstructured(kind, rv))
			if err != nil {
				t.Fatal(err)
			}
			v := viewOf(t, jsonOf(o))
			fx.views[string(jsonOf(o))] = v
			return o, &cached{key: o.Key, json: jsonOf(o), view: v}
		}
		var ds []deltafifo.Delta
		for i, s := range initial {
			o, obj := encode(s, uint64(i+1))
			ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
			m.initial[obj.key] = obj
		}
		rv := strconv.FormatUint(syncRV, 10)
		ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: rv, Synced: true})
		p.Cache().Apply(ds)
		m.synced, m.syncRV, m.cur, m.floor = true, syncRV, syncRV, syncRV
		state := m.initial
		for _, next := range changes {
			typ, s := next()
			m.cur++
			o, obj := encode(s, m.cur)
			p.Cache().Apply([]deltafifo.Delta{{Type: typ, Object: o, ResourceVersion: o.ResourceVersion}})
			after := map[string]*cached{}
			for k, v := range state {
				after[k] = v
			}
			ch := change{rv: m.cur, prev: state[obj.key], obj: obj}
			switch {
			case typ == watch.Deleted:
				ch.typ = pb.EventType_EVENT_TYPE_DELETED
				delete(after, obj.key)
			case ch.prev != nil:
				ch.typ = pb.EventType_EVENT_TYPE_MODIFIED
				after[obj.key] = obj
			default:
				ch.typ = pb.EventType_EVENT_TYPE_ADDED
				after[obj.key] = obj
			}
			m.changes = append(m.changes, ch)
			m.states = append(m.states, after)
			state = after
		}
		if drop := len(m.changes) - c.History.MaxEvents; drop > 0 {
			m.floor = m.changes[drop-1].rv
		}
	}
	pods, _ := set.Lookup("pods")
	web := func(extra ...string) map[string]string {
		l := map[string]string{"app": "web"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	p0 := spec{ns: "a", name: "p0", labels: web("tier", "front"), node: "n0", images: []string{"web:1"}}
	bp0 := spec{ns: "b", name: "p0", labels: web(), node: "n0", images: []string{"web:2", "web:2"}}
	bq1 := spec{ns: "b", name: "q1", labels: map[string]string{"app": "", "example.com/role": "x"}, node: "n1", images: []string{"db:1"}}
	feed(pods, encoder(c.Resources[0]), "Pod", []spec{
		p0,
		{ns: "a", name: "p1", labels: map[string]string{"app": "db"}, node: "n1", images: []string{"db:1", "sidecar:1"}},
		{ns: "a", name: "p2"},
		bp0, bq1,
		{ns: "c", name: "big", labels: web(), node: "n2", images: []string{"web:1"}, pad: 2000},
	}, 20, []func() (watch.EventType, spec){
		func() (watch.EventType, spec) {
			return watch.Added, spec{ns: "a", name: "p3", labels: web(), node: "n1", images: []string{"web:1"}}
		},
		func() (watch.EventType, spec) {
			p0.labels, p0.node = map[string]string{"app": "api", "tier": "front"}, "n2"
			return watch.Modified, p0
		},
		func() (watch.EventType, spec) { return watch.Deleted, bq1 },
		func() (watch.EventType, spec) {
			bp0.labels = web("tier", "back")
			return watch.Modified, bp0
		},
		func() (watch.EventType, spec) {
			return watch.Added, spec{ns: "d", name: "p9", labels: map[string]string{"app": "db"}, node: "n0", images: []string{"db:2"}}
		},
	})
	nodes, _ := set.Lookup("nodes")
	feed(nodes, encoder(c.Resources[1]), "Node", []spec{
		{name: "n0", labels: map[string]string{"zone": "a"}},
		{name: "n1", labels: map[string]string{"zone": "b"}},
	}, 30, nil)

	fx.srv = server.New(set, fuzzOptions)
	t.Cleanup(fx.srv.Stop)
	return fx
}

// jsonOf is o's JSON; the objects of these tests are hot.
func jsonOf(o *object.Object) []byte {
	b, err := o.Bytes()
	if err != nil {
		panic(err)
	}
	return b
}
