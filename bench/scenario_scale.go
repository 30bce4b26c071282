package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// The scale scenario's columns.
const (
	colScaleHeap    = "heap bytes/pod"
	colScaleRSS     = "RSS bytes/pod"
	colScaleAnon    = "anonymous RSS bytes/pod"
	colScaleRSSMiB  = "RSS MiB"
	colScaleHeapMiB = "heap MiB"
	colScaleSync    = "sync s"
	colScaleListP50 = "list by index p50 ms"
	colScaleListP99 = "list by index p99 ms"
	colScaleFull    = "full list s"
	colScaleStored  = "stored bytes/pod"
	colScaleJSON    = "JSON bytes/pod"
	// colScaleSlack and colScaleIdle tell where anonymous RSS above the
	// heap is, right after the heap reading's forced collections: slack,
	// the free room inside spans that hold live objects (heap in use less
	// heap allocated: fragmentation); idle, free spans the runtime keeps
	// and has not returned to the OS.
	colScaleSlack = "span slack bytes/pod"
	colScaleIdle  = "idle unreturned bytes/pod"

	colCheckSecs     = "integrity check s"
	colCheckCPU      = "integrity check informerd CPU-s"
	colCheckRequests = "integrity check upstream requests"
	colCheckMiB      = "integrity check upstream MiB"
)

// scaleCheckInterval is --consistency-check-interval for the informerd
// whose integrity check the scale scenario measures.
const scaleCheckInterval = 20 * time.Second

// scaleCooled bounds the wait for a cold cache to be compressed: the
// cooling loop compresses 256 objects per step, a few milliseconds apart.
const scaleCooled = 3 * time.Minute

// scale is issue 38's scenario: as many pods as the machine allows (200,000
// in full mode), loaded through kube-apiserver, cached by informerd with
// each --cache-compression setting and managedFields stripped or kept, and
// by a client-go informer with the same transform. For each informerd it
// reports the heap and RSS, the time to sync from the API server (cold)
// and from its --state-dir (warm), List by index, and a full List through
// its Kubernetes API; for kube-apiserver, its RSS holding the same pods and
// the same full List.
func scale(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:  "scale",
		Title: fmt.Sprintf("Scale: %d pods", b.scalePods),
		Plot:  colScaleHeap,
		Columns: []string{colScaleHeap, colScaleRSS, colScaleAnon, colScaleSlack, colScaleIdle, colScaleStored, colScaleJSON, colScaleSync, colScaleListP50, colScaleListP99, colScaleFull,
			colScaleHeapMiB, colScaleRSSMiB, colCheckSecs, colCheckCPU, colCheckRequests, colCheckMiB},
	}
	t := newTable()
	ns, empty := fmt.Sprintf("scale-%d", b.scalePods), "scale-empty"
	if err := b.cluster.loadPods(ctx, empty, 0, 1); err != nil {
		return s, err
	}
	start := time.Now()
	if err := b.cluster.loadPods(ctx, ns, b.scalePods, b.nodes); err != nil {
		return s, err
	}
	load := time.Since(start)
	jsonBytes, err := listJSONBytes(ctx, b, ns)
	if err != nil {
		return s, err
	}
	jsonPod := jsonBytes / float64(b.scalePods)
	apiList := func() (int64, error) { return fullList(ctx, b.cluster.kube, ns) }
	for run := range b.runs {
		base, err := b.emptyFootprints(ctx, empty)
		if err != nil {
			return s, err
		}
		// kube-apiserver holds the pods in its watch cache: its whole RSS,
		// as the reference the issue names, and the same full List.
		rss, err := rssBytes(b.cluster.apiPID)
		if err != nil {
			return s, err
		}
		api := []Label{{"cache", "kube-apiserver"}, {"managedFields", "kept"}, {"compression", "-"}, {"start", "-"}}
		t.add(api, colScaleRSSMiB, float64(rss)/(1<<20))
		if err := timeFullList(t, api, apiList); err != nil {
			return s, fmt.Errorf("kube-apiserver's list: %w", err)
		}
		for _, strip := range []bool{true, false} {
			fields := managedFields(strip)
			for _, mode := range []string{"off", "cold"} {
				if err := b.scaleInformerd(ctx, t, run, ns, strip, mode, base[0], jsonPod); err != nil {
					return s, fmt.Errorf("informerd, managedFields %s, compression %s: %w", fields, mode, err)
				}
			}
			started := time.Now()
			c, err := startChild("informer", "--kubeconfig="+b.cluster.kubeconfig, "--namespace="+ns, "--strip-managed-fields="+strconv.FormatBool(strip))
			if err != nil {
				return s, err
			}
			sync := time.Since(started)
			f, err := informerProc(c, b.scalePods).measure(ctx, false)
			c.stop()
			if err != nil {
				return s, err
			}
			labels := []Label{{"cache", "client-go informer"}, {"managedFields", fields}, {"compression", "-"}, {"start", "cold"}}
			t.add(labels, colScaleSync, sync.Seconds())
			t.add(labels, colScaleHeap, (f.heap-base[1].heap)/float64(b.scalePods))
			t.add(labels, colScaleRSS, (f.rss-base[1].rss)/float64(b.scalePods))
			t.add(labels, colScaleAnon, (f.anon-base[1].anon)/float64(b.scalePods))
			t.add(labels, colScaleHeapMiB, f.heap/(1<<20))
			t.add(labels, colScaleRSSMiB, f.rss/(1<<20))
		}
		if err := b.scaleIntegrity(ctx, t, ns); err != nil {
			return s, fmt.Errorf("integrity check: %w", err)
		}
		logf("run %d, scale of %d pods measured", run+1, b.scalePods)
	}
	s.Rows = t.rows()
	s.Goals = scaleGoals(&s, b.scalePods)
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d pods over %d nodes loaded through kube-apiserver (create, then status update, in protobuf, %d writers) in %v (%.0f pods/s); their JSON, managedFields included, is %.0f bytes per pod in kube-apiserver's list.",
			b.scalePods, b.nodes, loadWriters, load.Round(time.Second), float64(b.scalePods)/load.Seconds(), jsonPod),
		"Each run starts a fresh informerd per setting (--cache-compression off or cold; managedFields stripped or kept by the resource's transform) with an empty --state-dir: sync s (start=cold) is from the process's start to /readyz 200; it is stopped and started again on the same --state-dir: sync s (start=warm). heap and RSS are read once the cooling loop has compressed the cold cache (cold setting) and, on a cold start, the first whole state is written (informerd_state_full_writes_total; until then its checkpoint holds the objects as they were before compression), after a settle; per pod, minus the same process on an empty namespace. stored bytes/pod is informerd_cache_object_bytes{form=\"stored\"} per object. anonymous RSS is RssAnon: RSS without mapped files' pages, since --state-dir's bbolt file is mapped into informerd and its pages, the kernel's to evict, count in RSS.",
		fmt.Sprintf("list by index: %d sequential gRPC Lists of one node's pods (Limit 5000). full list s: the median of 3 GETs of the whole namespace as JSON (no limit) through informerd's Kubernetes API and kube-apiserver's, read to the end.", b.lists),
		"kube-apiserver: its whole process's RSS holding every pod the run created (the other scenarios' too when they ran before; run -scenarios=scale alone for a clean reference), from its watch cache.",
		"client-go informer: a SharedIndexInformer with the same transform, in a process of its own; sync s from its start to WaitForCacheSync.",
		memLimitNote(),
		fmt.Sprintf("integrity check (issue 36): an informerd (defaults: pages of 500, 50 ms apart) with --consistency-check-interval=%v checks its synced cache once; s is the check's own duration (/readyz tookSeconds), CPU-s informerd's CPU from its readiness to the check's end (the cooling loop's included), requests and MiB kube-apiserver's pod LISTs and their response bytes over the same time (apiserver_request_total, apiserver_response_sizes_sum).", scaleCheckInterval))
	return s, nil
}

// memLimitNote says what GOMEMLIMIT every process of the run had: the
// harness's environment, which kube-apiserver, etcd, informerd and the
// client-go informer inherit. At 200,000 pods kube-apiserver's heap would
// otherwise grow to twice its live objects between collections, past this
// machine's memory.
func memLimitNote() string {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " for every process (kube-apiserver, etcd, informerd, the client-go informer): each collects garbage harder as its memory nears it, so RSS follows the live heap more closely (a soft limit: a live heap larger than it goes past it)."
	}
	return "No GOMEMLIMIT: each process's heap may grow to twice its live objects between collections (GOGC=100)."
}

func managedFields(strip bool) string {
	if strip {
		return "stripped"
	}
	return "kept"
}

// scaleInformerd measures one informerd setting on ns, cold and then warm.
func (b *bench) scaleInformerd(ctx context.Context, t *table, run int, ns string, strip bool, mode string, base footprint, jsonPod float64) error {
	stateDir, err := os.MkdirTemp(b.dir, "scale-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	cfg := podsConfigStrip(ns, strip)
	for _, start := range []string{"cold", "warm"} {
		began := time.Now()
		d, err := startInformerd(b.informerdBin, b.cluster, b.dir, cfg, "--cache-compression="+mode, "--state-dir="+stateDir)
		if err != nil {
			return err
		}
		sync := time.Since(began)
		labels := []Label{{"cache", "informerd"}, {"managedFields", managedFields(strip)}, {"compression", mode}, {"start", start}}
		err = b.scaleMeasure(ctx, t, run, labels, d, ns, mode, start == "cold", base, jsonPod)
		d.stop()
		if err != nil {
			return err
		}
		t.add(labels, colScaleSync, sync.Seconds())
	}
	return nil
}

// scaleMeasure waits until d's cache is compressed (mode cold) and, on a
// cold start, its first whole state is written, then adds its memory, List
// by index and full List to t. With -profile, the first run's Lists by
// index are traced and profiled (scale-<managedFields>-<mode>-<start>-lists-
// trace.pprof and -profile.pprof).
func (b *bench) scaleMeasure(ctx context.Context, t *table, run int, labels []Label, d *daemon, ns, mode string, cold bool, base footprint, jsonPod float64) error {
	stored, err := waitCooled(ctx, d, mode, b.scalePods)
	if err != nil {
		return err
	}
	if cold {
		if err := waitStateWritten(ctx, d); err != nil {
			return err
		}
	}
	sleep(ctx, b.memorySettle)
	f, err := informerdProc(d).measure(ctx, false)
	if err != nil {
		return err
	}
	n := float64(b.scalePods)
	// --state-dir's file is mapped into the process (bbolt): its pages
	// count in RSS but are the kernel's to evict. Anonymous RSS (anon) is
	// the process's own memory.
	t.add(labels, colScaleAnon, (f.anon-base.anon)/n)
	t.add(labels, colScaleHeap, (f.heap-base.heap)/n)
	t.add(labels, colScaleRSS, (f.rss-base.rss)/n)
	t.add(labels, colScaleHeapMiB, f.heap/(1<<20))
	t.add(labels, colScaleRSSMiB, f.rss/(1<<20))
	t.add(labels, colScaleStored, stored/n)
	t.add(labels, colScaleJSON, jsonPod)
	if m, err := scrape(ctx, d.metricsURL); err == nil {
		inuse, alloc := m.sum("go_memstats_heap_inuse_bytes", nil), m.sum("go_memstats_heap_alloc_bytes", nil)
		idle, released := m.sum("go_memstats_heap_idle_bytes", nil), m.sum("go_memstats_heap_released_bytes", nil)
		t.add(labels, colScaleSlack, (inuse-alloc)/n)
		t.add(labels, colScaleIdle, (idle-released)/n)
	}
	// The Lists take about 10 µs a pod; the profiles cover them (and, when
	// they are quicker, the full Lists after them).
	seconds := 1 + b.lists*(b.scalePods/b.nodes)/100_000
	name := "scale"
	for _, l := range labels[1:] { // managedFields, compression, start
		name += "-" + l.Value
	}
	name += "-lists"
	traced := saveProfile(b, run, name, "trace", seconds, pprofHTTP(d.metricsURL))
	profiled := saveProfile(b, run, name, "profile", seconds, pprofHTTP(d.metricsURL))
	defer traced()
	defer profiled()
	if b.profileDir != "" && run == 0 {
		sleep(ctx, 200*time.Millisecond) // the profiles' requests arrive
	}
	var lat []float64
	for i := range b.lists {
		began := time.Now()
		resp, err := d.client.List(ctx, &pb.ListRequest{Resource: "pods", Limit: 5000,
			Selector: &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{nodeName(i, b.nodes)}}}})
		if err != nil {
			return fmt.Errorf("list by index: %w", err)
		}
		if len(resp.GetObjects()) == 0 {
			return fmt.Errorf("list by index of %s: no pods", nodeName(i, b.nodes))
		}
		lat = append(lat, float64(time.Since(began))/float64(time.Millisecond))
	}
	slices.Sort(lat)
	t.add(labels, colScaleListP50, lat[len(lat)/2])
	t.add(labels, colScaleListP99, lat[min(len(lat)-1, len(lat)*99/100)])
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(d.kubeAPI))
	if err != nil {
		return err
	}
	return timeFullList(t, labels, func() (int64, error) { return fullList(ctx, kube, ns) })
}

// waitCooled waits, with mode cold, until informerd has compressed all
// but the history's few hot objects of its n (at least 95%), and returns
// the bytes its objects are stored in.
func waitCooled(ctx context.Context, d *daemon, mode string, n int) (float64, error) {
	deadline := time.Now().Add(scaleCooled)
	for {
		s, err := scrape(ctx, d.metricsURL)
		if err != nil {
			return 0, err
		}
		stored := s.sum("informerd_cache_object_bytes", map[string]string{"resource": "pods", "form": "stored"})
		cold := s.sum("informerd_cache_stored_objects", map[string]string{"resource": "pods", "state": "cold"})
		if mode != "cold" || cold >= 0.95*float64(n) {
			return stored, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%v after sync, %.0f of %d objects compressed", scaleCooled, cold, n)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// waitStateWritten waits until informerd has written its first whole
// state (--state-dir) after a cold start: until then the write's
// checkpoint holds the objects as they were before compression, and the
// heap is not the steady one.
func waitStateWritten(ctx context.Context, d *daemon) error {
	deadline := time.Now().Add(scaleCooled)
	for {
		s, err := scrape(ctx, d.metricsURL)
		if err != nil {
			return err
		}
		if s.sum("informerd_state_full_writes_total", map[string]string{"resource": "pods"}) >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no whole state written %v after the cache was compressed", scaleCooled)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// timeFullList adds the median of three runs of list to t.
func timeFullList(t *table, labels []Label, list func() (int64, error)) error {
	var secs []float64
	for range 3 {
		began := time.Now()
		if _, err := list(); err != nil {
			return err
		}
		secs = append(secs, time.Since(began).Seconds())
	}
	slices.Sort(secs)
	t.add(labels, colScaleFull, secs[1])
	return nil
}

// fullList GETs every pod of ns as JSON in one response, without a limit,
// and reads it to the end: the bytes read.
func fullList(ctx context.Context, kube kubernetes.Interface, ns string) (int64, error) {
	rc, err := kube.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
		SetHeader("Accept", "application/json").Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

// scaleGoals judges issue 38's goals on the medians.
func scaleGoals(s *Scenario, pods int) []Goal {
	var goals []Goal
	find := func(col, cache, fields, mode, start string) (float64, bool) {
		return s.find(col, Label{"cache", cache}, Label{"managedFields", fields}, Label{"compression", mode}, Label{"start", start})
	}
	for _, fields := range []string{"stripped", "kept"} {
		inf, ok1 := find(colScaleHeap, "informerd", fields, "cold", "cold")
		cg, ok2 := find(colScaleHeap, "client-go informer", fields, "-", "cold")
		if ok1 && ok2 {
			goals = append(goals, Goal{Name: "heap per cached pod, managedFields " + fields + ", --cache-compression=cold", Target: "≤ 0.25× client-go's",
				Measured: inf / cg, Met: inf <= 0.25*cg, Detail: fmt.Sprintf("%.0f vs %.0f bytes", inf, cg)})
		}
		heap, ok1 := find(colScaleHeap, "informerd", fields, "cold", "cold")
		rss, ok2 := find(colScaleAnon, "informerd", fields, "cold", "cold")
		if ok1 && ok2 {
			goals = append(goals, Goal{Name: "steady anonymous RSS per pod / live heap per pod, managedFields " + fields + " (the state file's mapped pages left out)", Target: "≤ 1.5×",
				Measured: rss / heap, Met: rss <= 1.5*heap, Detail: fmt.Sprintf("%.0f vs %.0f bytes", rss, heap)})
		}
	}
	api, ok1 := find(colScaleRSSMiB, "kube-apiserver", "kept", "-", "-")
	inf, ok2 := find(colScaleRSSMiB, "informerd", "kept", "cold", "cold")
	if ok1 && ok2 {
		goals = append(goals, Goal{Name: fmt.Sprintf("informerd's RSS at %d pods (managedFields kept, cold) / kube-apiserver's", pods), Target: "< 1",
			Measured: inf / api, Met: inf < api, Detail: fmt.Sprintf("%.0f vs %.0f MiB", inf, api)})
	}
	apiList, ok1 := find(colScaleFull, "kube-apiserver", "kept", "-", "-")
	infList, ok2 := find(colScaleFull, "informerd", "kept", "cold", "cold")
	if ok1 && ok2 {
		goals = append(goals, Goal{Name: "full List from informerd's cache (managedFields kept, cold) / from kube-apiserver", Target: "< 1",
			Measured: infList / apiList, Met: infList < apiList, Detail: fmt.Sprintf("%.2f vs %.2f s", infList, apiList)})
	}
	off, ok1 := find(colScaleListP99, "informerd", "stripped", "off", "cold")
	cold, ok2 := find(colScaleListP99, "informerd", "stripped", "cold", "cold")
	if ok1 && ok2 {
		goals = append(goals, Goal{Name: "List by index p99, cold / off (managedFields stripped)", Target: "≤ 1.5×",
			Measured: cold / off, Met: cold <= 1.5*off, Detail: fmt.Sprintf("%.2f vs %.2f ms", cold, off)})
	}
	return goals
}

// scaleIntegrity measures one integrity check of informerd's cache of ns:
// its duration, informerd's CPU and kube-apiserver's LIST requests and
// bytes while it ran.
func (b *bench) scaleIntegrity(ctx context.Context, t *table, ns string) error {
	pods := map[string]string{"resource": "pods", "verb": "LIST"}
	before, err := b.cluster.apiMetrics(ctx)
	if err != nil {
		return err
	}
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(ns), fmt.Sprintf("--consistency-check-interval=%v", scaleCheckInterval))
	if err != nil {
		return err
	}
	defer d.stop()
	cpu0, err := cpuSeconds(d.pid)
	if err != nil {
		return err
	}
	var last struct {
		Resources []struct {
			Consistency *struct {
				Last struct {
					Result      string  `json:"result"`
					TookSeconds float64 `json:"tookSeconds"`
					Reason      string  `json:"reason"`
				} `json:"last"`
			} `json:"consistency"`
		} `json:"resources"`
	}
	deadline := time.Now().Add(3*scaleCheckInterval + scaleCooled)
	for {
		if err := getJSON(ctx, strings.TrimSuffix(d.metricsURL, "/metrics")+"/readyz?format=json", &last); err != nil {
			return err
		}
		if len(last.Resources) == 1 && last.Resources[0].Consistency != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no integrity check within %v of readiness", 3*scaleCheckInterval+scaleCooled)
		}
		sleep(ctx, 200*time.Millisecond)
	}
	cpu1, err := cpuSeconds(d.pid)
	if err != nil {
		return err
	}
	after, err := b.cluster.apiMetrics(ctx)
	if err != nil {
		return err
	}
	c := last.Resources[0].Consistency.Last
	if c.Result != "match" {
		return fmt.Errorf("the check's result is %q (%s), want match", c.Result, c.Reason)
	}
	labels := []Label{{"cache", "informerd"}, {"managedFields", "kept"}, {"compression", "cold"}, {"start", "check"}}
	t.add(labels, colCheckSecs, c.TookSeconds)
	t.add(labels, colCheckCPU, cpu1-cpu0)
	t.add(labels, colCheckRequests, after.sum("apiserver_request_total", pods)-before.sum("apiserver_request_total", pods))
	t.add(labels, colCheckMiB, (after.sum("apiserver_response_sizes_sum", pods)-before.sum("apiserver_response_sizes_sum", pods))/(1<<20))
	return nil
}

// getJSON GETs url and decodes its JSON body into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
