package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/reflector"
)

// Caches is what the collector reads at scrape time.
type Caches interface {
	Reports() []pipeline.Report
}

// Collector reports each resource's cache, upstream and watch state when
// scraped, read from the pipelines: nothing is copied on the hot path.
type Collector struct {
	caches Caches
	now    func() time.Time
}

var (
	descObjects     = desc("informerd_cache_objects", "Objects in the cache.")
	descBytes       = desc("informerd_cache_bytes", "Approximate bytes the cached objects hold (JSON and metadata).")
	descRV          = desc("informerd_cache_resource_version", "The cache's resourceVersion, as a number.")
	descSynced      = desc("informerd_cache_synced", "1 once the resource's first list has completed, else 0.")
	descHistory     = desc("informerd_cache_history_events", "Events held in the history window for watch resume.")
	descStaleness   = desc("informerd_upstream_staleness_seconds", "Seconds since the last event or bookmark from the API server.")
	descRelists     = desc("informerd_upstream_relists_total", "Full lists from the API server, the first one included.")
	descWatchStarts = desc("informerd_upstream_watch_starts_total", "Watch requests sent to the API server; more than one means the watch was restarted.")
	descExpired     = desc("informerd_upstream_expired_total", "410 Gone answers from the API server (the resourceVersion was compacted), each forcing a relist.")
	descErrors      = desc("informerd_upstream_errors_total", "Failed lists and watches, of any kind.")
	descWatchers    = desc("informerd_watchers", "Open Watch streams.")
	descQueueMax    = desc("informerd_watch_queue_depth_max", "The longest queue of undelivered changes among the Watch streams.")
	descOldest      = desc("informerd_watch_oldest_undelivered_seconds", "Age of the oldest change that some Watch stream has not been handed yet; 0 when none waits.")
	descCoalesced   = desc("informerd_watch_coalesced_events_total", "Changes absorbed by coalescing Watch streams (slow_consumer_policy COALESCE).")
	descProjections = desc("informerd_watch_projections", "Distinct field masks in use by the resource's Watch streams (bounded by --max-projections).")
	descProjEncodes = desc("informerd_watch_projection_encodes_total", "Objects projected through a field mask for Watch streams: once per live event and distinct mask, however many streams share the mask, plus once per object of a replay or initial list.")
	descProjCompare = desc("informerd_watch_projection_compares_total", "Earlier states projected to find whether a MODIFIED changed anything a field mask keeps; a change that did not is sent to no stream with that mask.")

	descRestored    = desc("informerd_cache_restored", "1 while the cache serves what was restored from --state-dir at start and the API server has not yet confirmed it (accepted the watch resumed from its resourceVersion, or answered a relist), else 0.")
	descStateLag    = desc("informerd_state_lag_events", "Cached changes not yet written to --state-dir.")
	descStateLagAge = desc("informerd_state_lag_seconds", "Age of the oldest cached change not yet written to --state-dir; 0 when none waits.")
	descStateWrites = desc("informerd_state_writes_total", "Successful writes of the cache's changes to --state-dir.")
	descStateFull   = desc("informerd_state_full_writes_total", "Writes of the whole cache to a new state file: the first after a cold start, and whenever the writer fell behind the history window.")
	descStateErrors = desc("informerd_state_write_errors_total", "Failed writes to --state-dir (a full disk, an I/O error); each is retried with backoff while serving goes on.")
	descStateTime   = desc("informerd_state_write_seconds_total", "Time spent writing to --state-dir.")
	descStateBytes  = desc("informerd_state_bytes", "Size of the resource's state file.")
	descStateAside  = desc("informerd_state_set_aside", "1 when the state found at start failed a check (damaged, another cluster or configuration, another format version) and was moved aside, so the resource started cold; else 0.")

	descIngestErrors = prometheus.NewDesc("informerd_cache_ingest_errors_total",
		"Changes from the API server that could not be cached, by reason: encode (the object could not be encoded), queue (the queue refused it). Each is recovered by listing again.",
		[]string{"resource", "reason"}, nil)
	descChecks = prometheus.NewDesc("informerd_cache_consistency_checks_total",
		"Integrity checks of the cache against the API server's list at the cache's resourceVersion, by result: match; mismatch (logged with the first differing keys, and the resource listed again); skipped (the resourceVersion was compacted, or the cache could not be compared: not synced, restored and not confirmed, a relist due); error (the list failed).",
		[]string{"resource", "result"}, nil)
	descInconsistent = desc("informerd_cache_inconsistent", "1 from an integrity check that found the cache different from the API server until one finds them equal, else 0.")
	descObjectBytes  = prometheus.NewDesc("informerd_cache_object_bytes",
		"Bytes of the cached objects' JSON, by form: json (as served) and stored (as held in memory: compressed for the cold objects, --cache-compression).",
		[]string{"resource", "form"}, nil)
	descStoredObjects = prometheus.NewDesc("informerd_cache_stored_objects",
		"Cached objects by how they are held: hot (JSON as it is: changed recently, or compression off) and cold (compressed with the resource's dictionary).",
		[]string{"resource", "state"}, nil)
	descDictTrainings = desc("informerd_cache_compression_dictionaries_total", "Compression dictionaries trained on the resource's objects: the first once the cache is large enough, then one each time the objects drifted from the last one's sample.")
	descDictBytes     = desc("informerd_cache_compression_dictionary_bytes", "Size of the resource's current compression dictionary; 0 before the first.")
	descDamaged       = desc("informerd_cache_damaged_objects_total", "Reads that found a cold object's stored bytes damaged (they do not decompress to the JSON they were made from). The damaged bytes are never served: the reader gets an error, and the object is replaced by listing again.")
	descIndexErrors   = prometheus.NewDesc("informerd_index_errors_total",
		"Evaluations of an index expression that failed on an object, which was cached without a value in that index.",
		[]string{"resource", "index"}, nil)
)

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"resource"}, nil)
}

// NewCollector returns a collector over caches.
func NewCollector(caches Caches) *Collector {
	return &Collector{caches: caches, now: time.Now}
}

var _ prometheus.Collector = (*Collector)(nil)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descObjects, descBytes, descRV, descSynced, descHistory, descStaleness, descRelists, descWatchStarts, descExpired, descErrors, descWatchers, descQueueMax, descOldest, descCoalesced, descProjections, descProjEncodes, descProjCompare, descIngestErrors, descIndexErrors, descChecks, descInconsistent,
		descRestored, descStateLag, descStateLagAge, descStateWrites, descStateFull, descStateErrors, descStateTime, descStateBytes, descStateAside,
		descObjectBytes, descStoredObjects, descDictTrainings, descDictBytes, descDamaged} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.caches.Reports() {
		st, name := r.Status, r.Name
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name)
		}
		gauge(descObjects, float64(st.Cache.Objects))
		gauge(descBytes, float64(st.Cache.Bytes))
		if rv, ok := object.ParseRV(st.Cache.ResourceVersion); ok {
			gauge(descRV, float64(rv))
		}
		synced := 0.0
		if st.Cache.Synced {
			synced = 1
		}
		gauge(descSynced, synced)
		gauge(descHistory, float64(st.Cache.HistoryEvents))
		ch <- prometheus.MustNewConstMetric(descObjectBytes, prometheus.GaugeValue, float64(st.Cache.RawBytes), name, "json")
		ch <- prometheus.MustNewConstMetric(descObjectBytes, prometheus.GaugeValue, float64(st.Cache.StoredBytes), name, "stored")
		ch <- prometheus.MustNewConstMetric(descStoredObjects, prometheus.GaugeValue, float64(st.Cache.Objects-st.Cache.Cold), name, "hot")
		ch <- prometheus.MustNewConstMetric(descStoredObjects, prometheus.GaugeValue, float64(st.Cache.Cold), name, "cold")
		counter(descDictTrainings, r.Compression.Codec.Trainings)
		gauge(descDictBytes, float64(r.Compression.Codec.DictBytes))
		counter(descDamaged, r.Compression.Codec.Damaged)
		ws := r.Watch
		gauge(descWatchers, float64(ws.Watchers))
		gauge(descQueueMax, float64(ws.MaxQueueDepth))
		age := 0.0
		if !ws.OldestUndelivered.IsZero() {
			age = c.now().Sub(ws.OldestUndelivered).Seconds()
		}
		gauge(descOldest, age)
		counter(descCoalesced, ws.Coalesced)
		gauge(descProjections, float64(ws.Projections))
		counter(descProjEncodes, ws.ProjectionEncodes)
		counter(descProjCompare, ws.ProjectionCompares)
		if st.Phase == pipeline.Restored {
			gauge(descRestored, 1)
		} else {
			gauge(descRestored, 0)
		}
		if s := r.State; s != nil {
			gauge(descStateLag, float64(s.LagEvents))
			lag := 0.0
			if !s.Oldest.IsZero() {
				lag = max(c.now().Sub(s.Oldest).Seconds(), 0)
			}
			gauge(descStateLagAge, lag)
			counter(descStateWrites, s.Writes)
			counter(descStateFull, s.FullWrites)
			counter(descStateErrors, s.WriteErrors)
			ch <- prometheus.MustNewConstMetric(descStateTime, prometheus.CounterValue, s.WriteSeconds, name)
			gauge(descStateBytes, float64(s.Bytes))
			aside := 0.0
			if s.SetAside != "" {
				aside = 1
			}
			gauge(descStateAside, aside)
		}
		for _, result := range pipeline.CheckResults {
			ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(r.Consistency.Counts[result]), name, result)
		}
		inconsistent := 0.0
		if r.Consistency.Inconsistent {
			inconsistent = 1
		}
		gauge(descInconsistent, inconsistent)
		for index, n := range r.IndexErrors {
			ch <- prometheus.MustNewConstMetric(descIndexErrors, prometheus.CounterValue, float64(n), name, index)
		}
		sig := r.Upstream
		if sig == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descIngestErrors, prometheus.CounterValue, float64(sig.EncodeErrors.Load()), name, reflector.ReasonEncode)
		ch <- prometheus.MustNewConstMetric(descIngestErrors, prometheus.CounterValue, float64(sig.QueueErrors.Load()), name, reflector.ReasonQueue)
		if last := sig.LastEventTime(); !last.IsZero() {
			gauge(descStaleness, c.now().Sub(last).Seconds())
		}
		counter(descRelists, sig.Relists.Load())
		counter(descWatchStarts, sig.WatchStarts.Load())
		counter(descExpired, sig.Expired.Load())
		counter(descErrors, sig.Errors.Load())
	}
}
