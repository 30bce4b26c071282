package object

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testPodJSON returns the JSON of pod i of a deployment-like fleet: the
// fields a real pod has, with names, labels, node, images and times that
// vary from pod to pod.
func testPodJSON(rng *rand.Rand, i int) []byte {
	apps := []string{"web", "api", "worker", "cache", "batch", "gateway"}
	app := apps[rng.IntN(len(apps))]
	ns := []string{"default", "prod", "staging", "team-a", "team-b"}[rng.IntN(5)]
	hash := fmt.Sprintf("%08x", rng.Uint32())
	name := fmt.Sprintf("%s-%s-%05d", app, hash[:5], i)
	image := fmt.Sprintf("registry.example.com/%s/%s:v1.%d.%d", ns, app, rng.IntN(20), rng.IntN(10))
	ip := fmt.Sprintf("10.%d.%d.%d", rng.IntN(256), rng.IntN(256), rng.IntN(256))
	pod := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":              name,
			"namespace":         ns,
			"uid":               fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff),
			"resourceVersion":   strconv.Itoa(1000 + i),
			"creationTimestamp": fmt.Sprintf("2026-11-%02dT%02d:%02d:%02dZ", 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60)),
			"generateName":      app + "-" + hash[:5] + "-",
			"labels": map[string]any{
				"app":               app,
				"pod-template-hash": hash[:5],
				"tier":              []string{"front", "back", "data"}[rng.IntN(3)],
			},
			"annotations": map[string]any{
				"kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z",
				"prometheus.io/scrape":              strconv.FormatBool(rng.IntN(2) == 0),
			},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app + "-" + hash[:5],
				"uid": fmt.Sprintf("%08x", rng.Uint32()), "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"nodeName":                      fmt.Sprintf("node-%03d", rng.IntN(200)),
			"restartPolicy":                 "Always",
			"terminationGracePeriodSeconds": 30,
			"dnsPolicy":                     "ClusterFirst",
			"serviceAccountName":            app,
			"schedulerName":                 "default-scheduler",
			"containers": []any{map[string]any{
				"name":  app,
				"image": image,
				"ports": []any{map[string]any{"containerPort": 8080 + rng.IntN(4), "protocol": "TCP"}},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": fmt.Sprintf("%dm", 100*(1+rng.IntN(8))), "memory": fmt.Sprintf("%dMi", 128*(1+rng.IntN(8)))},
				},
				"env": []any{
					map[string]any{"name": "APP", "value": app},
					map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
				},
				"terminationMessagePath":   "/dev/termination-log",
				"terminationMessagePolicy": "File",
				"imagePullPolicy":          "IfNotPresent",
			}},
			"tolerations": []any{
				map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
				map[string]any{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
			},
		},
		"status": map[string]any{
			"phase":    []string{"Running", "Running", "Running", "Pending", "Succeeded"}[rng.IntN(5)],
			"podIP":    ip,
			"hostIP":   fmt.Sprintf("192.168.%d.%d", rng.IntN(256), rng.IntN(256)),
			"qosClass": "Burstable",
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-02T03:04:05Z"},
				map[string]any{"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-02T03:04:05Z"},
				map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-02T03:04:01Z"},
			},
			"containerStatuses": []any{map[string]any{
				"name": app, "ready": true, "restartCount": rng.IntN(3), "image": image,
				"containerID": fmt.Sprintf("containerd://%016x%016x", rng.Uint64(), rng.Uint64()),
			}},
		},
	}
	b, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return b
}

// testObject returns a hot object holding json.
func testObject(i int, json []byte) *Object {
	key := fmt.Sprintf("ns/o%05d", i)
	ns, name := SplitKey(key)
	return &Object{Key: key, Namespace: ns, Name: name, UID: "uid-" + name, ResourceVersion: strconv.Itoa(100 + i), RV: uint64(100 + i), data: json}
}

// testFleet returns n hot pods.
func testFleet(seed uint64, n int) []*Object {
	rng := rand.New(rand.NewPCG(seed, 1))
	objs := make([]*Object, n)
	for i := range objs {
		objs[i] = testObject(i, testPodJSON(rng, i))
	}
	return objs
}

// samplesOf returns the JSON of every step'th object.
func samplesOf(t testing.TB, objs []*Object, step int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < len(objs); i += step {
		b, err := objs[i].Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// trained returns a codec trained on a sample of objs that reports damage
// to the counter returned.
func trained(t testing.TB, objs []*Object) (*Codec, *damageLog) {
	t.Helper()
	c := NewCodec(CodecOptions{})
	log := &damageLog{}
	c.OnDamage(log.record)
	if err := c.Train(samplesOf(t, objs, 16)); err != nil {
		t.Fatal(err)
	}
	return c, log
}

// damageLog keeps what a codec's OnDamage was told.
type damageLog struct {
	mu   sync.Mutex
	objs []*Object
	errs []error
}

func (l *damageLog) record(o *Object, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objs, l.errs = append(l.objs, o), append(l.errs, err)
}

func (l *damageLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.objs)
}

// mustRead returns o's JSON through Bytes and AppendBytes, failing the
// test unless both give want.
func mustRead(t testing.TB, o *Object, want []byte) {
	t.Helper()
	got, err := o.Bytes()
	if err != nil {
		t.Fatalf("Bytes of %s: %v", o.Key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Bytes of %s differ from the JSON compressed:\n got %q\nwant %q", o.Key, got, want)
	}
	prefix := []byte("prefix:")
	got, err = o.AppendBytes(prefix)
	if err != nil {
		t.Fatalf("AppendBytes of %s: %v", o.Key, err)
	}
	if !bytes.Equal(got, append([]byte("prefix:"), want...)) {
		t.Fatalf("AppendBytes of %s differ from the JSON compressed", o.Key)
	}
	if o.Len() != len(want) {
		t.Fatalf("Len of %s = %d, want %d", o.Key, o.Len(), len(want))
	}
}

func TestCodecRoundTrip(t *testing.T) {
	objs := testFleet(1, 400)
	c, log := trained(t, objs)
	var raw, stored int
	for _, o := range objs {
		cold, err := c.Compress(o)
		if err != nil {
			t.Fatal(err)
		}
		if o.Cold() || !cold.Cold() {
			t.Fatalf("Compress: original cold %v, copy cold %v; want a cold copy of a hot object", o.Cold(), cold.Cold())
		}
		if cold.Dict() != c.Current() || cold.Key != o.Key || cold.ResourceVersion != o.ResourceVersion || cold.UID != o.UID {
			t.Fatalf("cold copy of %s lost its fields or dictionary", o.Key)
		}
		mustRead(t, cold, o.data)
		if cold.StoredLen() >= cold.Len() {
			t.Errorf("%s: %d bytes stored for %d of JSON", o.Key, cold.StoredLen(), cold.Len())
		}
		if cold.Size() >= o.Size() {
			t.Errorf("%s: Size %d cold, %d hot", o.Key, cold.Size(), o.Size())
		}
		h, err := cold.Hot()
		if err != nil || h.Cold() || !bytes.Equal(h.data, o.data) {
			t.Fatalf("Hot of %s: cold %v, err %v", o.Key, h != nil && h.Cold(), err)
		}
		raw += cold.Len()
		stored += cold.StoredLen()
	}
	ratio := float64(raw) / float64(stored)
	st := c.Stats()
	t.Logf("%d pods: %d bytes of JSON stored in %d (%.1fx), dictionary %d bytes", len(objs), raw, stored, ratio, st.DictBytes)
	if ratio < 3 {
		t.Errorf("compression ratio %.2f, want at least 3 for pods of one fleet", ratio)
	}
	if st.DictID != 1 || st.Trainings != 1 || st.DictBytes == 0 || st.DictBytes > DefaultMaxDictBytes || st.Damaged != 0 {
		t.Errorf("Stats = %+v", st)
	}
	if log.len() != 0 {
		t.Errorf("OnDamage called %d times on undamaged objects", log.len())
	}
}

// TestCodecConcurrentReads reads cold objects from many goroutines while
// the codec compresses and retrains (run with -race).
func TestCodecConcurrentReads(t *testing.T) {
	objs := testFleet(2, 200)
	c, _ := trained(t, objs)
	cold := make([]*Object, len(objs))
	for i, o := range objs {
		var err error
		if cold[i], err = c.Compress(o); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(cold); i += 2 {
				got, err := cold[i].Bytes()
				if err != nil || !bytes.Equal(got, objs[i].data) {
					t.Errorf("concurrent Bytes of %s: err %v, equal %v", cold[i].Key, err, bytes.Equal(got, objs[i].data))
					return
				}
				_ = c.Stale(cold[i])
				_ = c.Stats()
			}
		})
	}
	for i := range 50 {
		if _, err := c.Compress(objs[i]); err != nil {
			t.Error(err)
		}
	}
	if err := c.Train(samplesOf(t, objs, 7)); err != nil {
		t.Error(err)
	}
	wg.Wait()
}

func TestCodecRetrain(t *testing.T) {
	objs := testFleet(3, 300)
	c, log := trained(t, objs)
	first := c.Current()
	old := make([]*Object, len(objs))
	for i, o := range objs {
		var err error
		if old[i], err = c.Compress(o); err != nil {
			t.Fatal(err)
		}
		if c.Stale(old[i]) {
			t.Fatalf("%s compressed with the current dictionary is stale", o.Key)
		}
	}
	if c.Stale(objs[0]) {
		t.Fatal("a hot object is stale")
	}
	// A new dictionary, trained on other objects.
	if err := c.Train(samplesOf(t, testFleet(4, 300), 10)); err != nil {
		t.Fatal(err)
	}
	second := c.Current()
	if second == first || second.ID() == first.ID() {
		t.Fatalf("Train kept dictionary %d", first.ID())
	}
	if st := c.Stats(); st.Trainings != 2 || st.DictID != second.ID() {
		t.Errorf("Stats after a second Train = %+v", st)
	}
	for i, o := range old {
		// Still read with the dictionary they were made with.
		mustRead(t, o, objs[i].data)
		if !c.Stale(o) {
			t.Fatalf("%s of dictionary %d is not stale once %d is current", o.Key, o.Dict().ID(), second.ID())
		}
		// Compressed again: the copy is of the current dictionary, and
		// so is a copy of that copy.
		again, err := c.Compress(o)
		if err != nil {
			t.Fatal(err)
		}
		if again.Dict() != second || c.Stale(again) {
			t.Fatalf("%s recompressed with dictionary %d, want %d", o.Key, again.Dict().ID(), second.ID())
		}
		mustRead(t, again, objs[i].data)
		if o.Dict() != first {
			t.Fatalf("Compress changed the object it copied")
		}
	}
	if log.len() != 0 {
		t.Errorf("OnDamage called %d times", log.len())
	}
}

func TestCodecReleaseThenCompress(t *testing.T) {
	objs := testFleet(5, 50)
	c, _ := trained(t, objs)
	c.Release()
	c.Release() // twice is fine
	for _, o := range objs {
		cold, err := c.Compress(o)
		if err != nil {
			t.Fatal(err)
		}
		mustRead(t, cold, o.data)
		if o.Key == objs[len(objs)/2].Key {
			c.Release() // in the middle of a pass, too
		}
	}
}

func TestCodecErrors(t *testing.T) {
	objs := testFleet(6, 10)
	c := NewCodec(CodecOptions{})
	if _, err := c.Compress(objs[0]); !errors.Is(err, ErrNoDict) {
		t.Errorf("Compress before Train: %v, want ErrNoDict", err)
	}
	if c.Current() != nil || c.Stale(objs[0]) {
		t.Error("an untrained codec has a dictionary, or a hot object is stale")
	}
	for _, tc := range []struct {
		name    string
		samples [][]byte
	}{
		{name: "none"},
		{name: "empty", samples: [][]byte{{}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Train(tc.samples); err == nil {
				t.Errorf("Train(%q) trained a dictionary", tc.samples)
			}
			if c.Current() != nil || c.Stats().Trainings != 0 {
				t.Errorf("a failed Train left a dictionary: %+v", c.Stats())
			}
		})
	}
}

// TestCodecOddObjects compresses objects of unusual sizes: ones smaller
// than a zstd block header, the empty object, and one much larger than the
// dictionary; each reads back, or is refused and stays hot.
func TestCodecOddObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	big := make([]byte, 0, 1<<20)
	big = append(big, `{"data":"`...)
	for len(big) < 1<<20-2 {
		big = append(big, "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)])
	}
	big = append(big, `"}`...)
	for _, tc := range []struct {
		name    string
		samples [][]byte
		json    []byte
	}{
		{name: "tiny dictionary", samples: [][]byte{[]byte(`{}`)}, json: []byte(`{"a":1}`)},
		{name: "tiny object", samples: [][]byte{testPodJSON(rng, 1)}, json: []byte(`{}`)},
		{name: "one byte", samples: [][]byte{testPodJSON(rng, 1)}, json: []byte(`1`)},
		{name: "empty", samples: [][]byte{testPodJSON(rng, 1)}, json: []byte{}},
		{name: "large", samples: [][]byte{testPodJSON(rng, 1)}, json: big},
		{name: "dictionary cut", samples: [][]byte{big}, json: testPodJSON(rng, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCodec(CodecOptions{MaxDictBytes: 4 << 10})
			log := &damageLog{}
			c.OnDamage(log.record)
			if err := c.Train(tc.samples); err != nil {
				t.Fatal(err)
			}
			if n := c.Current().Len(); n > 4<<10 {
				t.Errorf("dictionary of %d bytes, bound 4KiB", n)
			}
			o := testObject(1, tc.json)
			cold, err := c.Compress(o)
			if err != nil {
				if len(tc.json) == 0 {
					return // refused: it stays hot
				}
				t.Fatal(err)
			}
			mustRead(t, cold, tc.json)
			if log.len() != 0 {
				t.Errorf("OnDamage: %v", log.errs)
			}
		})
	}
}

// TestBuildDictCoversShapes checks the greedy choice of Train: samples of
// a shape the dictionary already covers are left out while another shape
// is not in it, so a few shapes all fit in a small dictionary.
func TestBuildDictCoversShapes(t *testing.T) {
	// Pods of one ReplicaSet, which differ only in their names: the
	// first covers the others.
	pod := testPodJSON(rand.New(rand.NewPCG(8, 8)), 0)
	var samples [][]byte
	for i := range 40 {
		samples = append(samples, bytes.ReplaceAll(pod, []byte("00000"), fmt.Appendf(nil, "%05d", i)))
	}
	// One object of another shape, last.
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"kube-system"},"data":{"zzz.conf":"listen 8080; worker_processes 4; keepalive_timeout 65;"}}`)
	samples = append(samples, cm)
	max := 3 * len(samples[0])
	content, err := buildDict(samples, max)
	if err != nil {
		t.Fatal(err)
	}
	if len(content) > max {
		t.Errorf("dictionary of %d bytes, bound %d", len(content), max)
	}
	if !bytes.Contains(content, cm) {
		t.Errorf("the one ConfigMap was left out of a dictionary of pods")
	}
}

// TestCodecDrift compresses a window of objects like the sample, then
// windows of objects unlike it: the codec says it drifted, and a new
// Train clears it.
func TestCodecDrift(t *testing.T) {
	objs := testFleet(9, 300)
	c, _ := trained(t, objs)
	compress := func(next func(i int) *Object) {
		t.Helper()
		for raw, i := 0, 0; raw < driftWindow; i++ {
			o := next(i)
			if _, err := c.Compress(o); err != nil {
				t.Fatal(err)
			}
			raw += o.Len()
		}
	}
	like := func(i int) *Object { return objs[i%len(objs)] }
	compress(like) // the baseline
	compress(like)
	if c.Drifted() {
		t.Fatal("drifted while compressing the objects the dictionary was trained on")
	}
	// Other objects: random text compresses far worse against a
	// dictionary of pods.
	rng := rand.New(rand.NewPCG(9, 9))
	unlike := func(i int) *Object {
		b := make([]byte, 2048)
		for j := range b {
			b[j] = "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]
		}
		return testObject(i, b)
	}
	compress(unlike)
	if !c.Drifted() {
		t.Fatal("not drifted after a window of objects unlike the sample")
	}
	if err := c.Train(samplesOf(t, objs, 8)); err != nil {
		t.Fatal(err)
	}
	if c.Drifted() {
		t.Error("still drifted after Train")
	}
}

// TestCodecStaleOtherCodec: an object of another codec's dictionary is
// stale for this one; a hot one never is.
func TestCodecStaleOtherCodec(t *testing.T) {
	objs := testFleet(10, 32)
	a, _ := trained(t, objs)
	b, _ := trained(t, objs)
	cold, err := a.Compress(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{false, true, false}, []bool{a.Stale(cold), b.Stale(cold), b.Stale(objs[0])}); diff != "" {
		t.Errorf("Stale (-want +got):\n%s", diff)
	}
}

// TestWithJSON: a hot copy of a cold object holds the JSON given.
func TestWithJSON(t *testing.T) {
	objs := testFleet(11, 16)
	c, _ := trained(t, objs)
	cold, err := c.Compress(objs[3])
	if err != nil {
		t.Fatal(err)
	}
	h := cold.WithJSON([]byte(`{"kind":"Pod"}`))
	if h.Cold() || h.Dict() != nil || h.Len() != 14 || h.StoredLen() != 14 || h.Key != cold.Key {
		t.Errorf("WithJSON of a cold object: cold %v, len %d", h.Cold(), h.Len())
	}
	mustRead(t, h, []byte(`{"kind":"Pod"}`))
	mustRead(t, cold, objs[3].data)
}
