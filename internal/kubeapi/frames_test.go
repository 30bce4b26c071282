package kubeapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/kubeproto"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/printers"
)

// The frame model test drives one cache and hub of pods with random
// changes (label, node and phase changes that move pods in and out of
// selections, managedFields that come and go, deletions, the API server's
// bookmarks), a clock that moves by fractions of seconds, and watchers of
// every encoding × selector × start (from now, with initial events, and
// later ones that replay history), written through eventWriter as a watch
// writes them. It checks:
//
//   - each watcher's bytes are exactly what referenceFrames, which encodes
//     every frame for that watcher alone from the object's JSON (informerd's
//     writer before frames were shared), gives for the same items;
//   - a watcher writes an event that comes alone in one Write, of the very
//     bytes every other watcher of that encoding writes for it (with forms
//     large enough to keep them).
//
// With forms too small to keep anything, the bytes must be the same.
//
// Each encoding but a Table's is also watched as a compressed WatchList
// (flushGzip, one gzip member per flush): its bytes, decompressed, must be
// the reference's, and an event that comes alone must be written as one
// member shared by every compressed watcher of that encoding.

// frameEncodings are the encodings a watch can negotiate, the conversion's
// group version included where it could matter.
func frameEncodings() []output {
	v1, v1beta1 := metav1.SchemeGroupVersion, metav1beta1.SchemeGroupVersion
	var outs []output
	for _, drop := range []bool{false, true} {
		outs = append(outs,
			output{dropManagedFields: drop},
			output{as: asMetadata, metaGV: v1, dropManagedFields: drop},
			output{as: asMetadata, metaGV: v1beta1, dropManagedFields: drop},
			output{media: mediaProtobuf, dropManagedFields: drop},
			output{media: mediaProtobuf, as: asMetadata, metaGV: v1, dropManagedFields: drop},
			output{media: mediaProtobuf, as: asMetadata, metaGV: v1beta1, dropManagedFields: drop},
		)
	}
	// A Table is meta.k8s.io/v1 whatever the request's version, and
	// keeps managedFields (includeObject=Object): neither is in its key.
	for _, inc := range []metav1.IncludeObjectPolicy{metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject} {
		outs = append(outs, output{as: asTable, metaGV: v1, table: tableOptions{include: inc}})
	}
	outs = append(outs,
		output{as: asTable, metaGV: v1beta1, table: tableOptions{include: metav1.IncludeMetadata}},
		output{as: asTable, metaGV: v1, table: tableOptions{include: metav1.IncludeObject}, dropManagedFields: true},
	)
	return append(outs, output{as: asNothing, metaGV: v1})
}

// frameSelectors are watch selections: label, field (through the node
// index, read from the JSON, by name) and namespace.
var frameSelectors = []struct {
	namespace, labels, fields string
}{
	{},
	{namespace: "team-1"},
	{labels: "app=web"},
	{labels: "app!=web,tier=front"},
	{fields: "spec.nodeName=node-1"},
	{fields: "status.phase!=Running"},
	{fields: "metadata.name=pod-3"},
	{namespace: "team-0", labels: "app=db", fields: "spec.nodeName=node-0"},
}

// recordingResponse is a watch's response that keeps what is written, and
// where each write's bytes were.
type recordingResponse struct {
	header http.Header
	buf    []byte
	writes []piece
}

type piece struct {
	at *byte
	n  int
}

func (r *recordingResponse) Header() http.Header { return r.header }
func (r *recordingResponse) WriteHeader(int)     {}
func (r *recordingResponse) FlushError() error   { return nil }
func (r *recordingResponse) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	r.writes = append(r.writes, piece{unsafe.SliceData(p), len(p)})
	return len(p), nil
}

type frameWatcher struct {
	name string
	enc  int
	gzip bool
	cols *columns
	w    *fanout.Watcher
	ew   *eventWriter
	rec  *recordingResponse
	out  *output
	// want is what referenceFrames gives; headed, whether it has written
	// a Table's columns.
	want   []byte
	headed bool
	events int
	ended  bool
}

type frameModel struct {
	t   *testing.T
	rnd *rand.Rand
	h   *Handler
	res fakeServed
	enc *object.Encoder
	ix  *indexer.Indexer
	hub *fanout.Hub
	// cols are the Table columns: the pod printer, and the default
	// printer, as another resource's (or a CRD's refetched) columns.
	cols   [2]*columns
	clock  time.Time
	rv     int
	pods   map[string]*object.Object
	ws     []*frameWatcher
	shared map[sharedKey]map[*byte]bool
	// checkShared: forms keep every encoding of the test.
	checkShared bool
}

// sharedKey is one event as one encoding writes it.
type sharedKey struct {
	enc  int
	gzip bool
	cols *columns
	o    *object.Object
	typ  watch.EventType
	at   int64
}

func TestWatchFramesShared(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seed     uint64
		maxBytes int
	}{
		{name: "forms keep every frame", seed: 1, maxBytes: DefaultMaxFormBytes},
		{name: "forms keep every frame, another schedule", seed: 2, maxBytes: DefaultMaxFormBytes},
		{name: "forms keep nothing", seed: 3, maxBytes: formShards},
		{name: "forms evict", seed: 4, maxBytes: 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFrameModel(t, tc.seed, tc.maxBytes)
			m.checkShared = tc.maxBytes == DefaultMaxFormBytes
			m.addWatchers("early", "")
			for round := range 50 {
				m.change()
				m.clock = m.clock.Add(time.Duration(m.rnd.IntN(700)) * time.Millisecond)
				if round == 25 {
					m.addWatchers("late", "1010") // replays the history after the first changes
				}
				m.deliver()
			}
			m.check()
		})
	}
}

func newFrameModel(t *testing.T, seed uint64, maxBytes int) *frameModel {
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := printers.For(schema.GroupResource{Resource: "pods"})
	m := &frameModel{
		t:      t,
		rnd:    rand.New(rand.NewPCG(seed, seed)),
		h:      &Handler{forms: newForms(maxBytes)},
		enc:    enc,
		ix:     indexer.New(enc.IndexNames(), indexer.Options{HistoryMaxEvents: 100000}),
		cols:   [2]*columns{{printer: pr}, {printer: printers.Default}},
		clock:  time.Date(2026, 1, 2, 3, 4, 5, 250e6, time.UTC),
		rv:     1000,
		pods:   map[string]*object.Object{},
		shared: map[sharedKey]map[*byte]bool{},
	}
	m.h.clock = func() time.Time { return m.clock }
	var ds []deltafifo.Delta
	for i := range 8 {
		o := m.pod(fmt.Sprintf("pod-%d", i))
		m.pods[o.Name] = o
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: strconv.Itoa(m.rv), Synced: true})
	m.ix.Apply(ds)
	m.hub = fanout.New(m.ix, fanout.Options{QueueLength: 100000})
	m.res = fakeServed{cache: m.ix}
	t.Cleanup(func() { m.hub.Close(nil) })
	return m
}

// pod is a new version of the pod name, at the next resourceVersion, with
// random labels, node, phase, managedFields and age.
func (m *frameModel) pod(name string) *object.Object {
	m.rv++
	i, _ := strconv.Atoi(name[len("pod-"):])
	pick := func(s ...string) string { return s[m.rnd.IntN(len(s))] }
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: fmt.Sprintf("team-%d", i%2), UID: types.UID("uid-" + name),
			ResourceVersion:   strconv.Itoa(m.rv),
			CreationTimestamp: metav1.NewTime(m.clock.Add(-time.Duration(m.rnd.IntN(300)) * time.Second).Truncate(time.Second)),
			Labels:            map[string]string{"app": pick("web", "db"), "tier": pick("front", "back")},
		},
		Spec: corev1.PodSpec{
			NodeName:   pick("node-0", "node-1", ""),
			Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(pick("Pending", "Running", "Succeeded"))},
	}
	if m.rnd.IntN(2) == 0 {
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}}
	}
	o, err := m.enc.EncodeUnstructured(benchdata.Unstructured(p))
	if err != nil {
		m.t.Fatal(err)
	}
	return o
}

// change applies a batch of one to three changes, or a bookmark.
func (m *frameModel) change() {
	if m.rnd.IntN(8) == 0 {
		m.rv++
		m.ix.Apply([]deltafifo.Delta{{Type: watch.Bookmark, ResourceVersion: strconv.Itoa(m.rv)}})
		return
	}
	var ds []deltafifo.Delta
	for range 1 + m.rnd.IntN(3) {
		name := fmt.Sprintf("pod-%d", m.rnd.IntN(10))
		typ := watch.Modified
		switch _, ok := m.pods[name]; {
		case !ok:
			typ = watch.Added
		case m.rnd.IntN(5) == 0:
			typ = watch.Deleted
		}
		o := m.pod(name)
		if typ == watch.Deleted {
			delete(m.pods, name)
		} else {
			m.pods[name] = o
		}
		ds = append(ds, deltafifo.Delta{Type: typ, Object: o, ResourceVersion: o.ResourceVersion})
	}
	m.ix.Apply(ds)
}

// addWatchers starts a watcher of every encoding, selector and start:
// from rv ("" is now), and with initial events and bookmarks.
func (m *frameModel) addWatchers(prefix, rv string) {
	for e, out := range frameEncodings() {
		for s, sel := range frameSelectors {
			for _, initial := range []bool{false, true} {
				m.addWatcher(prefix, rv, e, out, s, sel, initial, false)
				if out.as != asTable && out.as != asNothing {
					m.addWatcher(prefix, rv, e, out, s, sel, initial, true)
				}
			}
		}
	}
}

// addWatcher starts one watcher, compressed (gz) or not.
func (m *frameModel) addWatcher(prefix, rv string, e int, out output, s int, sel struct{ namespace, labels, fields string }, initial, gz bool) {
	opts := &metainternalversion.ListOptions{}
	var err error
	if opts.LabelSelector, err = labels.Parse(sel.labels); err != nil {
		m.t.Fatal(err)
	}
	if opts.FieldSelector, err = fields.ParseSelector(sel.fields); err != nil {
		m.t.Fatal(err)
	}
	fs := func() *fieldSet { return fieldsOf(podKind, true, nil, false) }
	selector, err := newSelector(opts, sel.namespace, fs, m.ix.IndexNames(), map[string]string{"spec.nodeName": "node"})
	if err != nil {
		m.t.Fatal(err)
	}
	wopts := fanout.WatchOptions{Selection: selector.sel, SendInitialEvents: initial, AllowBookmarks: initial || s%2 == 0}
	if !initial {
		wopts.ResourceVersion = rv
	}
	w, items, at, err := m.hub.Watch(wopts)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(w.Close)
	rec := &recordingResponse{header: http.Header{}}
	fw := &frameWatcher{
		name: fmt.Sprintf("%s %+v %+v initial=%v gzip=%v", prefix, out, sel, initial, gz),
		enc:  e, gzip: gz, w: w, rec: rec, out: &out,
	}
	if gz {
		fg := &flushGzip{ResponseWriter: rec}
		fg.WriteHeader(http.StatusOK)
		fw.ew = newEventWriter(m.h, m.res, fg, fw.out)
		fw.ew.gzip = fg
	} else {
		fw.ew = newEventWriter(m.h, m.res, rec, fw.out)
	}
	if out.as == asTable {
		fw.cols = m.cols[s%2]
		fw.ew.cols = fw.cols
	}
	m.ws = append(m.ws, fw)
	m.write(fw, items)
	if initial {
		fw.ew.bookmark(at, true)
		fw.ew.flush() // as a watch flushes after it
		m.reference(fw, []fanout.Item{{Type: watch.Bookmark, ResourceVersion: at}}, true)
	}
}

// deliver writes what every watcher has, and now and then an idle
// bookmark.
func (m *frameModel) deliver() {
	for _, fw := range m.ws {
		items, err := fw.w.Poll()
		if err != nil {
			m.t.Fatalf("%s: %v", fw.name, err)
		}
		if len(items) == 0 && m.rnd.IntN(4) == 0 {
			if it, ok := fw.w.IdleBookmark(); ok {
				items = []fanout.Item{it}
			}
		}
		m.write(fw, items)
	}
}

// write writes items to fw, as one batch or (as a watch writes an event
// that comes alone) one at a time, noting where each lone event's frame
// was, and what the reference gives for them.
func (m *frameModel) write(fw *frameWatcher, items []fanout.Item) {
	if len(items) > 1 && m.rnd.IntN(2) == 0 {
		fw.ew.write(items)
		if !fw.ew.flush() {
			fw.ended = true
		}
		for _, it := range items {
			if it.Type != watch.Bookmark {
				fw.events++
			}
		}
		m.reference(fw, items, false)
		return
	}
	for _, it := range items {
		from := len(fw.rec.writes)
		wasHeaded := fw.ew.headed
		fw.ew.write([]fanout.Item{it})
		if !fw.ew.flush() {
			fw.ended = true
		}
		if it.Type != watch.Bookmark {
			fw.events++
		}
		m.reference(fw, []fanout.Item{it}, false)
		if it.Type == watch.Bookmark || (fw.out.as == asTable && !wasHeaded) || from == len(fw.rec.writes) {
			continue // a watcher's own, or nothing written
		}
		if n := len(fw.rec.writes) - from; n != 1 {
			m.t.Errorf("%s: %s %s written alone in %d writes, want its frame in one", fw.name, it.Type, it.Object.ResourceVersion, n)
			continue
		}
		big := fw.rec.writes[from]
		k := sharedKey{enc: fw.enc, gzip: fw.gzip, cols: fw.cols, o: it.Object, typ: it.Type, at: m.clock.Unix()}
		if m.shared[k] == nil {
			m.shared[k] = map[*byte]bool{}
		}
		m.shared[k][big.at] = true
	}
}

func (m *frameModel) reference(fw *frameWatcher, items []fanout.Item, initialEnd bool) {
	var err error
	fw.want, fw.headed, err = referenceFrames(fw.want, m.h, podKind, fw.out, fw.cols, items, fw.headed, initialEnd, tableSecond(m.clock))
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *frameModel) check() {
	t := m.t
	delivered := 0
	for _, fw := range m.ws {
		got := fw.rec.buf
		if fw.gzip {
			// flushGzip ends every member at a flush: all of it reads.
			z, err := gzip.NewReader(bytes.NewReader(got))
			if err == nil {
				got, err = io.ReadAll(z)
			}
			if err != nil {
				t.Errorf("%s: the compressed stream does not read: %v", fw.name, err)
				continue
			}
		}
		if diff := cmp.Diff(string(fw.want), string(got)); diff != "" {
			t.Errorf("%s: the frames differ from those encoded for it alone (-alone +shared):\n%s", fw.name, diff)
		}
		if fw.out.as != asNothing {
			delivered += fw.events
		}
	}
	if delivered < 1000 {
		t.Fatalf("only %d events delivered: the schedule tests too little", delivered)
	}
	t.Logf("%d watchers, %d events delivered, %d (event, encoding) pairs written alone", len(m.ws), delivered, len(m.shared))
	if !m.checkShared {
		return
	}
	many, members := 0, 0
	for k, at := range m.shared {
		if len(at) > 1 {
			t.Errorf("%s %s of %s (encoding %+v, gzip %v) written from %d copies, want one shared by every watcher", k.typ, k.o.ResourceVersion, k.o.Name, frameEncodings()[k.enc], k.gzip, len(at))
		}
		many++
		if k.gzip {
			members++
		}
	}
	if many == 0 || members == 0 {
		t.Fatalf("%d events shared, %d of them as gzip members: want both", many, members)
	}
}

// referenceFrames appends to b the frames of items for one watcher of out
// alone, each encoded from the object's JSON for this watcher, as
// informerd wrote them before its watchers shared frames (Table ages
// printed at now); headed is whether a Table's columns have been written,
// and is returned updated. initialEnd marks the bookmark that ends the
// initial events.
func referenceFrames(b []byte, h *Handler, kind schema.GroupVersionKind, out *output, cols *columns, items []fanout.Item, headed, initialEnd bool, now time.Time) ([]byte, bool, error) {
	frame := func(typ string, obj []byte) {
		b = fmt.Appendf(b, `{"type":"%s","object":%s}`+"\n", typ, obj)
	}
	for _, it := range items {
		if out.as == asNothing {
			return b, headed, nil // the API server's encoder fails on the first event
		}
		if it.Type == watch.Bookmark {
			meta := fmt.Sprintf(`{"resourceVersion":%q,"creationTimestamp":null}`, it.ResourceVersion)
			if initialEnd {
				meta = fmt.Sprintf(`{"resourceVersion":%q,"creationTimestamp":null,"annotations":{%q:"true"}}`, it.ResourceVersion, metav1.InitialEventsAnnotationKey)
			}
			obj := fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":%s}`, kind.Kind, kind.GroupVersion().String(), meta)
			if out.media == mediaProtobuf {
				msg, err := kubeproto.Message(kind, obj)
				if out.as == asMetadata {
					msg, err = kubeproto.PartialMessage(obj)
				}
				if err != nil {
					return nil, headed, err
				}
				b = append(b, kubeproto.WatchFrame(string(watch.Bookmark), kubeproto.Object(protoKind(out, kind), msg))...)
				continue
			}
			switch out.as {
			case asMetadata:
				obj, _ = partialObjectMetadata(obj, out.metaGV.String())
			case asTable:
				t := out.table
				if initialEnd && t.include == metav1.IncludeNone {
					t.include = metav1.IncludeMetadata
				}
				obj = h.tableJSON(cols, t, oneObject((&object.Object{ResourceVersion: it.ResourceVersion}).WithJSON(obj)), metav1.ListMeta{ResourceVersion: it.ResourceVersion}, !headed, now)
			}
			headed = true
			frame(string(watch.Bookmark), obj)
			continue
		}
		data, _ := it.Object.Bytes()
		if out.dropManagedFields && out.as != asTable {
			data = withoutManagedFields(data)
		}
		if out.media == mediaProtobuf {
			msg, err := kubeproto.Message(kind, data)
			if out.as == asMetadata {
				msg, err = kubeproto.PartialMessage(data)
			}
			if err != nil {
				return nil, headed, err
			}
			b = append(b, kubeproto.WatchFrame(string(it.Type), kubeproto.Object(protoKind(out, kind), msg))...)
			continue
		}
		var obj []byte
		switch out.as {
		case asTable:
			obj = h.tableJSON(cols, out.table, oneObject(it.Object), metav1.ListMeta{ResourceVersion: it.Object.ResourceVersion}, !headed, now)
		case asMetadata:
			var err error
			if obj, err = partialObjectMetadata(data, out.metaGV.String()); err != nil {
				return nil, headed, err
			}
		default:
			obj = data
		}
		headed = true
		frame(string(it.Type), obj)
	}
	return b, headed, nil
}
