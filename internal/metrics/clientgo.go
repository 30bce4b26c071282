package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// ClientGo holds the metrics of informerd's requests to the API server,
// fed by client-go's REST client hooks.
type ClientGo struct {
	latency *prometheus.HistogramVec
	results *prometheus.CounterVec
}

// NewClientGo creates the instruments and registers them with reg.
func NewClientGo(reg prometheus.Registerer) *ClientGo {
	c := &ClientGo{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_kube_client_request_duration_seconds",
			Help:    "Latency of informerd's requests to the API server, by verb (watches count until their response headers).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"verb"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_kube_client_requests_total",
			Help: "informerd's requests to the API server, by HTTP method and status code.",
		}, []string{"method", "code"}),
	}
	reg.MustRegister(c.latency, c.results)
	return c
}

// Install makes client-go report to c. client-go keeps one set of hooks per
// process, and its Register takes only the first caller (a library such as
// controller-runtime may have been first), so Install sets the two hooks
// directly. Call it once, at start, before any request is made.
func (c *ClientGo) Install() {
	clientmetrics.RequestLatency = latency{c}
	clientmetrics.RequestResult = result{c}
}

type latency struct{ c *ClientGo }

// Observe implements client-go's LatencyMetric; the URL is left out, as its
// path would make the labels unbounded.
func (l latency) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	l.c.latency.WithLabelValues(verb).Observe(d.Seconds())
}

type result struct{ c *ClientGo }

// Increment implements client-go's ResultMetric.
func (r result) Increment(_ context.Context, code, method, _ string) {
	r.c.results.WithLabelValues(method, code).Inc()
}
