package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// relist is scenario 6: many watchers connected when kube-apiserver
// restarts with a history that no longer reaches their resourceVersion, so
// every upstream watch must relist: informerd's one relist against one per
// client-go informer. Nothing changes meanwhile, so clients should get no
// event at all.
func relist(ctx context.Context, b *bench) (Scenario, error) {
	s := Scenario{
		Name:    "relist",
		Title:   "6. Relist absorption",
		Plot:    "pod requests at kube-apiserver",
		Columns: []string{"pod requests at kube-apiserver", "pod response MiB", "events delivered to clients", "kube-apiserver CPU-s"},
	}
	t := newTable()
	n := b.relistN
	// A namespace of its own, small enough for n client-go informers to
	// each hold a copy in one process.
	const ns = "relist"
	if err := b.cluster.loadPods(ctx, ns, b.relistPods, b.nodes); err != nil {
		return s, err
	}
	d, err := startInformerd(b.informerdBin, b.cluster, b.dir, podsConfig(ns))
	if err != nil {
		return s, err
	}
	defer d.stop()
	for run := range b.runs {
		// informerd with n watchers.
		w, err := grpcWatchers(ctx, d.grpcAddr, n, b.nodes, nil, 0, nil)
		if err != nil {
			return s, err
		}
		reqs, bytes, cpu, err := restartAPIServer(ctx, b)
		if err != nil {
			w.close()
			return s, err
		}
		quiesce(w)
		delivered := total(w.take())
		failed := w.failed()
		w.close()
		if failed != nil {
			return s, fmt.Errorf("informerd's watchers during the restart: %w; informerd keeps its streams open while it relists", failed)
		}
		labels := []Label{{"clients", strconv.Itoa(n) + " watchers on informerd"}}
		t.add(labels, "pod requests at kube-apiserver", reqs)
		t.add(labels, "pod response MiB", bytes/(1<<20))
		t.add(labels, "events delivered to clients", float64(delivered))
		t.add(labels, "kube-apiserver CPU-s", cpu)

		// n client-go informers.
		k, err := startChild("informer", "--kubeconfig="+b.cluster.kubeconfig, "--namespace="+ns, "--strip-managed-fields=true", "--count="+strconv.Itoa(n))
		if err != nil {
			return s, err
		}
		reqs, bytes, cpu, err = restartAPIServer(ctx, b)
		if err != nil {
			k.stop()
			return s, err
		}
		fmt.Fprintln(k.stdin, "count")
		notified, _ := strconv.Atoi(strings.TrimSpace(<-k.lines))
		k.stop()
		labels = []Label{{"clients", strconv.Itoa(n) + " client-go informers"}}
		t.add(labels, "pod requests at kube-apiserver", reqs)
		t.add(labels, "pod response MiB", bytes/(1<<20))
		t.add(labels, "events delivered to clients", float64(notified))
		t.add(labels, "kube-apiserver CPU-s", cpu)
		logf("run %d, relist absorption measured", run+1)
	}
	s.Rows = t.rows()
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d pods in a namespace of their own; before each restart, configmap writes move etcd's revision past the clients' resourceVersion, so the restarted kube-apiserver's watch cache answers their watches with 410 and each upstream watch relists.", b.relistPods),
		fmt.Sprintf("Requests and bytes: kube-apiserver's apiserver_request_total plus apiserver_longrunning_requests (a request is counted in the total when it ends, and a relist stays open as the new watch), and apiserver_response_sizes plus apiserver_watch_events_sizes (relists are streaming lists), for pods, counted from its restart (its counters start at zero) until the clients have recovered (as many pod watches open at kube-apiserver as before the restart, polled every 2s; then 3s more) and at least %v has passed.", b.relistSettle),
		"informerd's requests are those of two informerds: this scenario's and the harness's main one, which watches the other namespace's pods and relists too.",
		"Events: what the clients' streams (or the informers' event handlers, which client-go calls with an update for every object a relist returns) received in that time; nothing changed, so the right answer is 0.")
	return s, nil
}

// restartAPIServer advances etcd's revision, restarts kube-apiserver,
// waits until the clients have recovered and at least b.relistSettle has
// passed, and returns the pod requests and response bytes the new
// kube-apiserver served, and its CPU. Recovered: as many pod watches are
// open at kube-apiserver as before the restart. client-go's backoff after
// the outage can delay a client's return by up to a minute, so no fixed
// wait fits every run; and a client whose last bookmark was recent
// resumes without a relist, so relists are no sign of recovery.
func restartAPIServer(ctx context.Context, b *bench) (requests, bytes, cpu float64, err error) {
	for i := range 20 {
		name := fmt.Sprintf("relist-%d-%d", time.Now().UnixNano(), i)
		if _, err := b.cluster.kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return 0, 0, 0, err
		}
	}
	before, err := b.cluster.apiMetrics(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	pods := map[string]string{"resource": "pods"}
	podWatches := map[string]string{"resource": "pods", "verb": "WATCH"}
	want := before.sum("apiserver_longrunning_requests", podWatches)
	began := time.Now()
	if err := b.cluster.env.RestartAPIServer(); err != nil {
		return 0, 0, 0, err
	}
	logf("kube-apiserver restarted in %v", time.Since(began).Round(time.Second))
	if b.cluster.apiPID, err = findProcess("kube-apiserver", b.cluster.env.CertDir()); err != nil {
		return 0, 0, 0, err
	}
	m := meterCPU(b.cluster.apiPID)
	time.Sleep(b.relistSettle)
	if err := waitRecovered(ctx, b.cluster.apiMetrics, podWatches, want, m.began, 3*time.Minute, 2*time.Second); err != nil {
		return 0, 0, 0, err
	}
	// The relists' initial events may still be streaming.
	time.Sleep(3 * time.Second)
	c, took := m.stop()
	logf("clients recovered %v after kube-apiserver's restart", took.Round(time.Second))
	var metrics samples
	const attempts = 5
	err = retry.OnError(wait.Backoff{Duration: 2 * time.Second, Factor: 1, Steps: attempts}, func(error) bool { return true }, func() error {
		var scrape error
		if metrics, scrape = b.cluster.apiMetrics(ctx); scrape != nil {
			logf("scraping kube-apiserver's metrics after recovery: %v (retrying)", scrape)
		}
		return scrape
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("scraping kube-apiserver's metrics after the clients recovered, %d attempts: %w", attempts, err)
	}
	// A relist is a streaming list (a watch with initial events) for
	// client-go and informerd alike: its bytes are watch event bytes.
	bytes = metrics.sum("apiserver_response_sizes_sum", pods) + metrics.sum("apiserver_watch_events_sizes_sum", pods)
	// kube-apiserver counts a request in apiserver_request_total when it
	// ends; a relist's streaming list stays open as the new watch, so the
	// open ones are added from its gauge of long-running requests.
	requests = metrics.sum("apiserver_request_total", pods) + metrics.sum("apiserver_longrunning_requests", pods)
	return requests, bytes, c[0], nil
}

// waitRecovered scrapes every `every` until the series matching watches sum
// to at least want, and fails when limit has passed since began. A
// kube-apiserver serving 1,000 relists at once can fail a scrape (make
// bench saw TLS handshakes time out for half a minute): a failed scrape is
// logged and retried, and the last failure is reported if the limit passes.
func waitRecovered(ctx context.Context, scrape func(context.Context) (samples, error), watches map[string]string, want float64, began time.Time, limit, every time.Duration) error {
	var (
		open   float64
		failed error // the last scrape's, if it failed
	)
	err := wait.PollUntilContextTimeout(ctx, every, limit-time.Since(began), true, func(ctx context.Context) (bool, error) {
		var metrics samples
		if metrics, failed = scrape(ctx); failed != nil {
			logf("scraping kube-apiserver's metrics during recovery: %v (retrying)", failed)
			return false, nil
		}
		open = metrics.sum("apiserver_longrunning_requests", watches)
		return open >= want, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case failed != nil:
		return fmt.Errorf("the clients had not recovered %v after kube-apiserver's restart: its metrics could not be scraped: %w", limit, failed)
	default:
		return fmt.Errorf("the clients had not recovered %v after kube-apiserver's restart: %.0f of %.0f pod watches open again", limit, open, want)
	}
}
