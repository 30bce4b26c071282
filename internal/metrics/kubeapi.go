package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KubeAPI are the instruments of the Kubernetes API listener. Its methods
// may be called concurrently.
type KubeAPI struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	watches   *prometheus.GaugeVec
	forwarded *prometheus.CounterVec
	consist   *prometheus.CounterVec
	delivery  *Metrics // the delivery delay histogram, shared with gRPC
}

// NewKubeAPI creates the Kubernetes API's instruments and registers them
// with reg. Its watches' delivery delays go to shared's histogram
// (informerd_watch_delivery_delay_seconds), with the gRPC watches'.
func NewKubeAPI(reg prometheus.Registerer, shared *Metrics) *KubeAPI {
	m := &KubeAPI{
		delivery: shared,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_kube_api_requests_total",
			Help: "Requests the Kubernetes API listener answered itself, by cached resource (empty for discovery), verb (get, list, watch, discovery) and HTTP code.",
		}, []string{"resource", "verb", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_kube_api_request_duration_seconds",
			Help:    "How long the Kubernetes API listener took to answer a get, list or discovery request, by resource and verb (a watch counts until it ends).",
			Buckets: delayBuckets,
		}, []string{"resource", "verb"}),
		watches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerd_kube_api_watches",
			Help: "Watches open on the Kubernetes API listener, by resource.",
		}, []string{"resource"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_kube_api_forwarded_total",
			Help: "Requests forwarded to the API server with the caller's token, by the API server's HTTP code (0: it could not be reached).",
		}, []string{"code"}),
		consist: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_kube_api_consistent_reads_total",
			Help: "Consistent reads (resourceVersion unset) on the Kubernetes API listener, by resource and outcome: current (the cache had reached the API server's resourceVersion), proven (a probe watch showed it current), behind (429: not in time), unavailable (429: the API server could not be asked).",
		}, []string{"resource", "outcome"}),
	}
	reg.MustRegister(m.requests, m.latency, m.watches, m.forwarded, m.consist)
	return m
}

// Request counts a request answered from the cache or discovery.
func (m *KubeAPI) Request(resource, verb string, code int, d time.Duration) {
	m.requests.WithLabelValues(resource, verb, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(resource, verb).Observe(d.Seconds())
}

// WatchStarted counts an open watch.
func (m *KubeAPI) WatchStarted(resource string) { m.watches.WithLabelValues(resource).Inc() }

// WatchEnded counts a watch that ended.
func (m *KubeAPI) WatchEnded(resource string) { m.watches.WithLabelValues(resource).Dec() }

// Forwarded counts a request forwarded to the API server.
func (m *KubeAPI) Forwarded(code int) { m.forwarded.WithLabelValues(strconv.Itoa(code)).Inc() }

// DeliveryObserver records the delivery delays of a watch of resource.
func (m *KubeAPI) DeliveryObserver(resource string) func(time.Duration) {
	return m.delivery.DeliveryObserver(resource)
}

// ConsistentRead counts a consistent read's outcome.
func (m *KubeAPI) ConsistentRead(resource, outcome string) {
	m.consist.WithLabelValues(resource, outcome).Inc()
}
