package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/testenv"
)

// cluster is the local control plane the benchmarks run against.
type cluster struct {
	env        *testenv.Env
	config     *rest.Config // high QPS: the harness is not a polite client
	kube       *kubernetes.Clientset
	kubeconfig string // file, for child processes
	apiPID     int
}

func startCluster(dir string) (*cluster, error) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	c := &cluster{env: env, config: rest.CopyConfig(env.Config)}
	c.config.QPS, c.config.Burst = 5000, 10000
	c.config.WarningHandler = rest.NoWarnings{} // benchdata's pods name two ports alike
	c.kube = kubernetes.NewForConfigOrDie(c.config)
	if c.apiPID, err = findProcess("kube-apiserver", env.CertDir()); err != nil {
		env.Stop()
		return nil, err
	}
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, env.KubeConfig, 0o600); err != nil {
		env.Stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) stop() { _ = c.env.Stop() }

// nodeName is the node of pod i.
func nodeName(i, nodes int) string { return fmt.Sprintf("node-%03d", i%nodes) }

// podsOnNode is how many of pods are on the node of pod i.
func podsOnNode(i, pods, nodes int) int {
	if i%nodes < pods%nodes {
		return pods/nodes + 1
	}
	return pods / nodes
}

// loadWriters is how many writers load pods at once.
const loadWriters = 16

// loadPods creates count realistic pods (benchdata.Pod: labels, owner, two
// containers, a running status written by a second field manager) in ns,
// spread over nodes, with loadWriters writers; it logs progress.
func (c *cluster) loadPods(ctx context.Context, ns string, count, nodes int) error {
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Protobuf, as kube-controller-manager and the kubelet write: it costs
	// kube-apiserver less to decode than JSON, and loading is bound by
	// kube-apiserver's and etcd's CPU.
	pc := rest.CopyConfig(c.config)
	pc.ContentType = "application/vnd.kubernetes.protobuf"
	pods := kubernetes.NewForConfigOrDie(pc).CoreV1().Pods(ns)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, loadWriters)
	start := time.Now()
	for range loadWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= count || ctx.Err() != nil {
					return
				}
				p := benchdata.Pod(i, nodes, 0)
				p.Namespace, p.UID, p.ResourceVersion, p.ManagedFields = ns, "", "", nil
				p.Spec.NodeName = nodeName(i, nodes)
				status := p.Status
				created, err := pods.Create(ctx, p, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
				if err == nil {
					created.Status = status
					_, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"})
				}
				if err != nil {
					errs <- fmt.Errorf("load pod %d: %w", i, err)
					return
				}
				if n := done.Add(1); n%2000 == 0 {
					logf("loaded %d/%d pods (%.0f/s)", n, count, float64(n)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	logf("loaded %d pods into %s in %v", count, ns, time.Since(start).Round(time.Second))
	return nil
}

// apiMetrics scrapes kube-apiserver's /metrics.
func (c *cluster) apiMetrics(ctx context.Context) (samples, error) {
	body, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body))
}

// samples are the series of a scrape.
type samples model.Vector

// parseMetrics parses the Prometheus text exposition.
func parseMetrics(text string) (samples, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out samples
	for _, f := range fams {
		v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, f)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// sum adds the values of the series named name whose labels include match.
func (s samples) sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, x := range s {
		if string(x.Metric[model.MetricNameLabel]) != name {
			continue
		}
		ok := true
		for k, want := range match {
			ok = ok && string(x.Metric[model.LabelName(k)]) == want
		}
		if ok {
			total += float64(x.Value)
		}
	}
	return total
}

// buckets returns the cumulative counts of the histogram buckets named
// name (a "_bucket" series), summed over their other labels, by upper
// bound.
func (s samples) buckets(name string) map[float64]float64 {
	out := map[float64]float64{}
	for _, x := range s {
		if string(x.Metric[model.MetricNameLabel]) != name {
			continue
		}
		le, err := strconv.ParseFloat(string(x.Metric["le"]), 64)
		if err == nil {
			out[le] += float64(x.Value)
		}
	}
	return out
}

// scrape reads a process's /metrics over HTTP.
func scrape(ctx context.Context, url string) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body))
}
