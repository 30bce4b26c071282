package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// consistentRate is how many consistent reads per second the fan-out's
// Kubernetes-API phases send beside the watches: lists of one node's pods
// with resourceVersion unset, each of which informerd answers from its
// cache only once the cache has reached the API server's current
// resourceVersion, and otherwise refuses with 429.
const consistentRate = 20

// consistentOutcomes are the outcomes informerd counts in
// informerd_kube_api_consistent_reads_total.
var consistentOutcomes = []string{"current", "proven", "behind", "unavailable"}

// consistentReads is what a consistentReader saw: responses by status code
// and the latency of each read answered with 200.
type consistentReads struct {
	codes   map[int]int
	latency []float64 // ms, sorted by stop
	errs    int
}

// consistentReader sends consistent lists of one node's pods (node i of
// nodes, in turn) in ns to host, rate per second, until the returned stop
// is called; stop waits for the reads in flight and returns what it saw.
func consistentReader(ctx context.Context, host, ns string, nodes int, rate float64) (stop func() consistentReads) {
	done := make(chan struct{})
	var (
		mu  sync.Mutex
		out = consistentReads{codes: map[int]int{}}
		wg  sync.WaitGroup
	)
	read := func(i int) {
		u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods?fieldSelector=%s", host, ns, url.QueryEscape("spec.nodeName="+nodeName(i, nodes)))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			panic(err) // a fixed, well-formed URL
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ms := float64(time.Since(start).Microseconds()) / 1000
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			out.errs++
		default:
			out.codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK {
				out.latency = append(out.latency, ms)
			}
		}
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				wg.Go(func() { read(i) })
			}
		}
	})
	return func() consistentReads {
		close(done)
		wg.Wait()
		slices.Sort(out.latency)
		return out
	}
}

// consistentCounts reads informerd's consistent-read outcomes from its
// metrics (the bench's informerd serves pods only).
func consistentCounts(ctx context.Context, metricsURL string) (map[string]float64, error) {
	s, err := scrape(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, o := range consistentOutcomes {
		out[o] = s.sum("informerd_kube_api_consistent_reads_total", map[string]string{"outcome": o})
	}
	return out, nil
}

// consistentColumns are the fan-out's columns for the consistent reads
// beside the Kubernetes API's watches.
var consistentColumns = []string{"consistent reads/s", "consistent from cache %", "consistent proven by probe %", "consistent 429 %", "consistent other %", "consistent p50 ms", "consistent p99 ms"}

// addConsistent adds the consistent reads of a phase of d to the row
// labels: their rate, the share of each outcome (answered from the cache,
// of which the share a probe proved current; refused with 429; anything
// else, including failed requests) from the responses the reader saw, and
// the latency of those answered. The outcomes are checked against
// informerd's own counts since before.
func addConsistent(ctx context.Context, t *table, metricsURL string, before map[string]float64, r consistentReads, labels []Label, d time.Duration) error {
	after, err := consistentCounts(ctx, metricsURL)
	if err != nil {
		return err
	}
	sent := r.errs
	for _, n := range r.codes {
		sent += n
	}
	if sent == 0 {
		return fmt.Errorf("consistent reader: no read completed in %v", d)
	}
	counted := map[string]float64{}
	for _, o := range consistentOutcomes {
		counted[o] = after[o] - before[o]
	}
	if ok, refused := counted["current"]+counted["proven"], counted["behind"]+counted["unavailable"]; int(ok) != r.codes[http.StatusOK] || int(refused) != r.codes[http.StatusTooManyRequests] {
		return fmt.Errorf("consistent reader: %d answered and %d refused with 429, informerd counted %.0f and %.0f (%v)", r.codes[http.StatusOK], r.codes[http.StatusTooManyRequests], ok, refused, counted)
	}
	share := func(n float64) float64 { return 100 * n / float64(sent) }
	other := sent - r.codes[http.StatusOK] - r.codes[http.StatusTooManyRequests]
	t.add(labels, "consistent reads/s", float64(sent)/d.Seconds())
	t.add(labels, "consistent from cache %", share(float64(r.codes[http.StatusOK])))
	t.add(labels, "consistent proven by probe %", share(counted["proven"]))
	t.add(labels, "consistent 429 %", share(float64(r.codes[http.StatusTooManyRequests])))
	t.add(labels, "consistent other %", share(float64(other)))
	t.add(labels, "consistent p50 ms", percentile(r.latency, 50))
	t.add(labels, "consistent p99 ms", percentile(r.latency, 99))
	logf("%v: %d consistent reads, %d from the cache (%.0f proven by a probe), %d refused with 429, %d other", labels, sent, r.codes[http.StatusOK], counted["proven"], r.codes[http.StatusTooManyRequests], other)
	return nil
}
