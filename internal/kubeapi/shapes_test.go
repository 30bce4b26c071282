package kubeapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	apisharding "k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/informerd/informerd/internal/kubeapi"
	"github.com/informerd/informerd/internal/testenv"
)

const secretsYAML = `
transform: {stripManagedFields: false}
resources:
  - resource: secrets
  - resource: configmaps
`

// secretValue is a Secret's data, which no metadata-only reader may see.
const secretValue = "hunter2-do-not-leak"

// TestMetadataInformer runs client-go's metadata informer on Secrets
// through informerd, in protobuf (which it asks for first) and in JSON: it
// syncs, follows every change (one that changes
// only data is still an update, as the API server sends it), and no byte
// of the Secrets' data reaches it.
func TestMetadataInformer(t *testing.T) {
	for _, c := range []struct {
		name   string
		json   bool
		marker string
	}{
		{"protobuf", false, "PartialObjectMetadata"},
		{"json", true, `"kind":"PartialObjectMetadata"`},
	} {
		t.Run(c.name, func(t *testing.T) { metadataInformer(t, c.json, c.marker) })
	}
}

// metadataInformer runs the metadata informer, its Accept headers left
// as client-go sets them or with their protobuf clauses removed (json),
// and wants marker in what it reads.
func metadataInformer(t *testing.T, json bool, marker string) {
	ns := namespace("kapi-metadata")
	f := setupWith(t, ns, secretsYAML)
	ctx := testContext(t)
	secrets := f.direct.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The bytes on the wire, list and watch: metadata only.
	rec := &recordingTransport{jsonOnly: json}
	cfg := rest.CopyConfig(f.cachedConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	inf := metadatainformer.NewFilteredMetadataInformer(mc, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	type event struct{ typ, name, rv string }
	events := make(chan event, 100)
	meta := func(obj any) *metav1.PartialObjectMetadata {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Errorf("the informer holds a %T, not PartialObjectMetadata", obj)
			return &metav1.PartialObjectMetadata{}
		}
		return m
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m := meta(o); events <- event{"add", m.Name, m.ResourceVersion} },
		UpdateFunc: func(_, o any) { m := meta(o); events <- event{"update", m.Name, m.ResourceVersion} },
		DeleteFunc: func(o any) { m := meta(o); events <- event{"delete", m.Name, m.ResourceVersion} },
	}); err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.Run(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the metadata informer did not sync through informerd")
	}
	next := func(what string) event { return testenv.Receive(t, time.Minute, what, events) }
	if ev := next("the informer's add of s1"); ev.typ != "add" || ev.name != "s1" {
		t.Fatalf("first event %+v, want the add of s1", ev)
	}

	s, err := secrets.Get(ctx, "s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"tier": "db"}
	if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next("the label change"); ev != (event{"update", "s1", s.ResourceVersion}) {
		t.Fatalf("after a label change: %+v, want the update to %s", ev, s.ResourceVersion)
	}
	s.StringData = map[string]string{"password": secretValue + "-2"}
	if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next("the data change"); ev != (event{"update", "s1", s.ResourceVersion}) {
		t.Fatalf("after a change of data only: %+v, want the update to %s (the API server sends it)", ev, s.ResourceVersion)
	}
	if err := secrets.Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next("the delete"); ev.typ != "delete" || ev.name != "s1" {
		t.Fatalf("after the delete: %+v", ev)
	}
	stop()
	if rec.requests() == 0 {
		t.Fatal("the informer's requests were not recorded")
	}
	if rec.saw(secretValue) {
		t.Fatalf("a Secret's data reached the metadata informer: %s", rec.body())
	}
	if !rec.saw(marker) {
		t.Fatalf("the informer's answers hold no PartialObjectMetadata: %q", rec.body())
	}
}

// TestMetadataListAsTheAPIServer compares a PartialObjectMetadataList and
// a PartialObjectMetadata get with the API server's, item by item, and
// runs controller-runtime's metadata-only cache through informerd.
func TestMetadataListAsTheAPIServer(t *testing.T) {
	ns := namespace("kapi-metadata-list")
	f := setupWith(t, ns, secretsYAML)
	ctx := testContext(t)
	for i := range 3 {
		if _, err := f.direct.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Labels: map[string]string{"i": fmt.Sprint(i)}}, StringData: map[string]string{"k": secretValue}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := f.direct.CoreV1().Secrets(ns).Get(ctx, "s2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRV(t, "secrets", last.ResourceVersion)

	for _, c := range []struct {
		name, path, accept string
	}{
		{"list", "/api/v1/namespaces/" + ns + "/secrets", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"list v1beta1", "/api/v1/namespaces/" + ns + "/secrets", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"},
		{"get", "/api/v1/namespaces/" + ns + "/secrets/s1", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct, cached := raw(t, env.Config, c.path, c.accept), raw(t, f.cachedConfig, c.path, c.accept)
			if bytes.Contains(cached.body, []byte(secretValue)) {
				t.Fatalf("informerd's answer holds the Secret's data: %s", cached.body)
			}
			var d, g map[string]any
			if err := json.Unmarshal(direct.body, &d); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(cached.body, &g); err != nil {
				t.Fatalf("informerd's answer: %v: %s", err, cached.body)
			}
			// The list's own resourceVersion is each server's current
			// one; every object, its metadata included, must be equal.
			for _, m := range []map[string]any{d, g} {
				if lm, ok := m["metadata"].(map[string]any); ok && m["items"] != nil {
					delete(lm, "resourceVersion")
				}
			}
			sameAs(t, "the answer", d, g)
		})
	}

	// controller-runtime's cache of PartialObjectMetadata.
	c, err := crcache.New(f.cachedConfig, crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()
	defer func() {
		stop()
		if err := testenv.Receive(t, time.Minute, "controller-runtime's cache to stop", done); err != nil {
			t.Errorf("cache: %v", err)
		}
	}()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	testenv.Eventually(t, time.Minute, "controller-runtime's metadata cache to list the Secrets through informerd", func() bool {
		return c.List(ctx, list) == nil && len(list.Items) == 3
	})
}

// TestDropManagedFields honours KEP-5958's Accept parameter
// drop=metadata.managedFields on get, list and watch of a resource cached
// with its managedFields, and keeps them for everyone else.
func TestDropManagedFields(t *testing.T) {
	ns := namespace("kapi-drop")
	f := setupWith(t, ns, secretsYAML)
	ctx := testContext(t)
	cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRV(t, "configmaps", cm.ResourceVersion)
	const drop = "application/json;drop=metadata.managedFields"
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, c := range []struct {
		name, path, accept string
		want               bool
	}{
		{"get", path + "/a", "application/json", true},
		{"get dropped", path + "/a", drop, false},
		{"list", path, "", true},
		{"list dropped", path, drop, false},
		{"metadata dropped", path + "/a", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;drop=metadata.managedFields", false},
		{"watch dropped", path + "?watch=true&resourceVersion=0&timeoutSeconds=1", drop, false},
		{"watch", path + "?watch=true&resourceVersion=0&timeoutSeconds=1", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := raw(t, f.cachedConfig, c.path, c.accept)
			if a.code != http.StatusOK {
				t.Fatalf("%d: %s", a.code, a.body)
			}
			if got := bytes.Contains(a.body, []byte(`"managedFields"`)); got != c.want {
				t.Fatalf("managedFields present: %v, want %v: %s", got, c.want, a.body)
			}
			if !bytes.Contains(a.body, []byte(`"name":"a"`)) {
				t.Fatalf("the object is missing: %s", a.body)
			}
		})
	}
}

// TestCompression gzips a list over 128 KiB for a client that accepts
// gzip, as the API server does, and nothing smaller; with compression off,
// nothing.
func TestCompression(t *testing.T) {
	ns := namespace("kapi-gzip")
	f := setupWith(t, ns, secretsYAML)
	off := setupUpstream(t, namespace("kapi-gzip-off"), secretsYAML, env.Config, func(o *kubeapi.Options) { o.DisableCompression = true })
	ctx := testContext(t)
	big := strings.Repeat("x", 2000)
	var last string
	for i := range 100 {
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%03d", i)}, Data: map[string]string{"k": big}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)
	off.waitRV(t, "configmaps", last)
	list := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, c := range []struct {
		name, path string
		cfg        *rest.Config
		want       string
	}{
		{"a large list", list, f.cachedConfig, "gzip"},
		{"a small list", list + "?limit=2", f.cachedConfig, ""},
		{"a get", list + "/cm001", f.cachedConfig, ""},
		{"a large list, compression off", list, off.cachedConfig, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct := gzipGet(t, env.Config, c.path)
			cached := gzipGet(t, c.cfg, c.path)
			if direct.encoding != c.want && c.cfg != off.cachedConfig {
				t.Fatalf("the API server's Content-Encoding %q, the case expects %q: the case is wrong", direct.encoding, c.want)
			}
			if cached.encoding != c.want {
				t.Fatalf("informerd's Content-Encoding %q, want %q", cached.encoding, c.want)
			}
			if cached.vary != direct.vary && c.cfg != off.cachedConfig {
				t.Errorf("Vary %q, the API server's %q", cached.vary, direct.vary)
			}
			if direct.items != cached.items {
				t.Fatalf("informerd's list has %d items, the API server's %d", cached.items, direct.items)
			}
		})
	}
}

type gzipAnswer struct {
	encoding, vary string
	items          int
}

// gzipGet gets path with Accept-Encoding: gzip, decompressing itself.
func gzipGet(t *testing.T, cfg *rest.Config, path string) gzipAnswer {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.DisableCompression = true // the transport adds no Accept-Encoding and decompresses nothing
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, strings.TrimSuffix(c.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = z
	}
	var obj struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(body).Decode(&obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return gzipAnswer{resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"), len(obj.Items)}
}

// recordingTransport keeps every response body a client reads.
type recordingTransport struct {
	next http.RoundTripper
	// jsonOnly removes the protobuf clauses of each request's Accept.
	jsonOnly bool
	mu       sync.Mutex
	n        int
	buf      bytes.Buffer
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.jsonOnly {
		var keep []string
		for _, c := range strings.Split(req.Header.Get("Accept"), ",") {
			if !strings.HasPrefix(c, runtime.ContentTypeProtobuf) {
				keep = append(keep, c)
			}
		}
		req = req.Clone(req.Context())
		req.Header.Set("Accept", strings.Join(keep, ","))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r}
	return resp, nil
}

func (r *recordingTransport) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *recordingTransport) saw(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.buf.Bytes(), []byte(s))
}

func (r *recordingTransport) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(r.buf.Bytes()))
	var out []string
	for sc.Scan() && len(out) < 5 {
		out = append(out, sc.Text())
	}
	return strings.Join(out, "\n")
}

type teeBody struct {
	io.ReadCloser
	r *recordingTransport
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.r.buf.Write(p[:n])
	b.r.mu.Unlock()
	return n, err
}

// TestProtobufClient lists, gets and watches through informerd with a
// client-go clientset that speaks protobuf only, and compares what it
// decodes with the same client pointed at the API server.
func TestProtobufClient(t *testing.T) {
	ns := namespace("kapi-protobuf")
	f := setupWith(t, ns, secretsYAML)
	ctx := testContext(t)
	protobufOnly := func(c *rest.Config) *kubernetes.Clientset {
		c = rest.CopyConfig(c)
		c.ContentType = runtime.ContentTypeProtobuf
		c.AcceptContentTypes = runtime.ContentTypeProtobuf
		return kubernetes.NewForConfigOrDie(c)
	}
	direct, cached := protobufOnly(env.Config), protobufOnly(f.cachedConfig)
	var last string
	for i := range 3 {
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}, Data: map[string]string{"k": strings.Repeat("é", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)

	opts := metav1.ListOptions{ResourceVersion: last, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	dl, err := direct.CoreV1().ConfigMaps(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cached.CoreV1().ConfigMaps(ns).List(ctx, opts)
	if err != nil {
		t.Fatalf("a protobuf list through informerd: %v", err)
	}
	sameAs(t, "the items of a protobuf list", dl.Items, cl.Items)
	paged, err := cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || paged.Continue == "" || paged.RemainingItemCount == nil || len(paged.Items) != 2 {
		t.Fatalf("a protobuf page: %v, continue %q, remaining %v, %d items", err, paged.Continue, paged.RemainingItemCount, len(paged.Items))
	}
	dg, err := direct.CoreV1().ConfigMaps(ns).Get(ctx, "cm2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cached.CoreV1().ConfigMaps(ns).Get(ctx, "cm2", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a protobuf get through informerd: %v", err)
	}
	sameAs(t, "a protobuf get", dg, cg)
	if _, err := cached.CoreV1().ConfigMaps(ns).Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a protobuf get of a missing object: %v, want NotFound decoded from a protobuf Status", err)
	}

	w, err := cached.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: last, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatalf("a protobuf watch through informerd: %v", err)
	}
	defer w.Stop()
	dg.Data = map[string]string{"k": "changed"}
	upd, err := f.direct.CoreV1().ConfigMaps(ns).Update(ctx, dg, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev := testenv.Receive(t, time.Minute, "the protobuf watch's event", w.ResultChan())
		if ev.Type == watch.Bookmark {
			continue
		}
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Modified || !ok {
			t.Fatalf("event %s %T, want MODIFIED ConfigMap", ev.Type, ev.Object)
		}
		sameAs(t, "the watched object", upd, cm)
		break
	}

	// A metadata-only protobuf list, as kube-controller-manager's garbage
	// collector asks for it.
	mcfg := rest.CopyConfig(f.cachedConfig)
	mcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	mc, err := metadata.NewForConfig(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	ml, err := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("a PartialObjectMetadataList in protobuf: %v", err)
	}
	if len(ml.Items) != 3 || ml.Items[2].ResourceVersion != upd.ResourceVersion {
		t.Fatalf("PartialObjectMetadataList in protobuf: %d items, want 3 with cm2 at %s", len(ml.Items), upd.ResourceVersion)
	}
}

// TestShards lists and watches four shardRange shards of configmaps
// through informerd: together they are the unsharded list and stream, no
// object in two, each what apimachinery's own selector keeps, and each list
// echoes its selector in shardInfo.
func TestShards(t *testing.T) {
	ns := namespace("kapi-shards")
	f := setupWith(t, ns, secretsYAML)
	ctx := testContext(t)
	var last string
	for i := range 24 {
		cm, err := f.direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%02d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	f.waitRV(t, "configmaps", last)
	bounds := []string{"0x0000000000000000", "0x4000000000000000", "0x8000000000000000", "0xc000000000000000", "0x10000000000000000"}
	shards := make([]string, 4)
	for i := range shards {
		shards[i] = fmt.Sprintf("shardRange(object.metadata.uid, '%s', '%s')", bounds[i], bounds[i+1])
	}
	all, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, s := range shards {
		sel, err := apisharding.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.cached.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ShardSelector: s})
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		if got.ShardInfo == nil || got.ShardInfo.Selector != sel.String() {
			t.Errorf("shard %d: shardInfo %+v, want %q", i, got.ShardInfo, sel.String())
		}
		var want, names []string
		for _, cm := range all.Items {
			if ok, err := sel.Matches(&cm); err != nil || !ok {
				continue
			}
			want = append(want, cm.Name)
		}
		for _, cm := range got.Items {
			names = append(names, cm.Name)
			seen[cm.Name]++
		}
		sameAs(t, fmt.Sprintf("shard %d's items, and what apimachinery's selector keeps of the whole list", i), want, names)
	}
	if len(seen) != len(all.Items) {
		t.Fatalf("the shards hold %d of %d objects", len(seen), len(all.Items))
	}
	for name, n := range seen {
		if n != 1 {
			t.Fatalf("%s is in %d shards", name, n)
		}
	}

	// The streams: every event of the unsharded watch in exactly one
	// shard's watch.
	type event struct{ typ, name, rv string }
	watchAll := func(opts metav1.ListOptions) <-chan event {
		opts.ResourceVersion = last
		w, err := f.cached.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		out := make(chan event, 100)
		go func() {
			for ev := range w.ResultChan() {
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					out <- event{string(ev.Type), cm.Name, cm.ResourceVersion}
				}
			}
		}()
		return out
	}
	whole := watchAll(metav1.ListOptions{})
	parts := make([]<-chan event, len(shards))
	for i, s := range shards {
		parts[i] = watchAll(metav1.ListOptions{ShardSelector: s})
	}
	for i := range 24 {
		name := fmt.Sprintf("cm%02d", i)
		if i%3 == 0 {
			if err := f.direct.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := f.direct.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var want []event
	for range 24 {
		want = append(want, testenv.Receive(t, time.Minute, "the unsharded watch's event", whole))
	}
	got := map[event]int{}
	for len(got) < len(want) {
		select {
		case ev := <-parts[0]:
			got[ev]++
		case ev := <-parts[1]:
			got[ev]++
		case ev := <-parts[2]:
			got[ev]++
		case ev := <-parts[3]:
			got[ev]++
		case <-time.After(30 * time.Second):
			t.Fatalf("the shards' watches delivered %d of the %d events", len(got), len(want))
		}
	}
	for _, ev := range want {
		if got[ev] != 1 {
			t.Fatalf("event %+v reached %d shards' watches, want 1", ev, got[ev])
		}
	}
}
