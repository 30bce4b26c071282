// Package metrics defines informerd's Prometheus metrics. The registry is
// passed in, never global. Labels are bounded: resource, reason; never a
// client or an object.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the instruments the pipeline and the server update as things
// happen. Its methods may be called concurrently.
type Metrics struct {
	ingest       *prometheus.HistogramVec
	delivery     *prometheus.HistogramVec
	streamsEnded *prometheus.CounterVec
	limitHits    *prometheus.CounterVec
	limitWaits   *prometheus.HistogramVec
}

// delayBuckets span 100µs to ~100s.
var delayBuckets = prometheus.ExponentialBuckets(0.0001, 4, 11)

// New creates the instruments and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ingest: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_cache_ingest_delay_seconds",
			Help:    "Time from receiving a change from the API server to its entry in the cache.",
			Buckets: delayBuckets,
		}, []string{"resource"}),
		delivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_watch_delivery_delay_seconds",
			Help:    "Time from a change's entry in the cache to its bytes being handed to a watch stream: a gRPC Watch, or a watch of the Kubernetes API (flushed).",
			Buckets: delayBuckets,
		}, []string{"resource"}),
		streamsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_watch_streams_ended_total",
			Help: "Watch streams ended, by reason: slow, too_old_resource_version, shutdown, client_gone, limit, revoked.",
		}, []string{"resource", "reason"}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerd_limit_rejections_total",
			Help: "Calls refused with RESOURCE_EXHAUSTED (List limits clamped), by the limit's flag name.",
		}, []string{"limit"}),
		limitWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerd_limit_wait_seconds",
			Help:    "How long calls past their client's rate waited for their turn before they were admitted, by the rate's flag name.",
			Buckets: delayBuckets,
		}, []string{"limit"}),
	}
	reg.MustRegister(m.ingest, m.delivery, m.streamsEnded, m.limitHits, m.limitWaits)
	return m
}

// ObserveIngest records one change's delay into the cache.
func (m *Metrics) ObserveIngest(resource string, d time.Duration) {
	if m != nil {
		m.ingest.WithLabelValues(resource).Observe(d.Seconds())
	}
}

// DeliveryObserver returns what records one change's delay from the cache
// to a stream of resource, with the label looked up once.
func (m *Metrics) DeliveryObserver(resource string) func(time.Duration) {
	if m == nil {
		return func(time.Duration) {}
	}
	h := m.delivery.WithLabelValues(resource)
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// StreamEnded counts a Watch stream ended for reason.
func (m *Metrics) StreamEnded(resource, reason string) {
	if m != nil {
		m.streamsEnded.WithLabelValues(resource, reason).Inc()
	}
}

// LimitHit counts a call refused (or a List clamped) by the named limit.
func (m *Metrics) LimitHit(limit string) {
	if m != nil {
		m.limitHits.WithLabelValues(limit).Inc()
	}
}

// ObserveLimitWait records how long a call waited for its turn under the
// named rate before it was admitted.
func (m *Metrics) ObserveLimitWait(limit string, d time.Duration) {
	if m != nil {
		m.limitWaits.WithLabelValues(limit).Observe(d.Seconds())
	}
}
