// Package health answers "is informerd alive and ready": the HTTP /healthz
// and /readyz endpoints and the gRPC health status, all from the caches'
// state. Ready means every resource has synced once; an upstream outage
// after that does not make informerd unready — it keeps serving its cache —
// but /readyz names the problem.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/informerd/informerd/internal/pipeline"
)

// Caches is what health reads.
type Caches interface {
	// Reports describe every resource.
	Reports() []pipeline.Report
	// WaitSynced returns once every resource has synced, or ctx's error.
	WaitSynced(ctx context.Context) error
}

// Healthz answers 200 while the process serves HTTP.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
}

// Report is what /readyz says, as JSON when asked (?format=json, or
// Accept: application/json); the text body says the same. informerctl
// status reads it.
type Report struct {
	// Ready is true once every resource has synced once; /readyz then
	// answers 200, else 503.
	Ready     bool       `json:"ready"`
	Resources []Resource `json:"resources"`
}

// Resource is one resource's state in a Report.
type Resource struct {
	// Name is the resource as configured.
	Name string `json:"name"`
	// Resource is the name informerd serves the resource under and labels
	// its metrics with: the canonical name once resolved ("deployments.apps"),
	// the configured one before.
	Resource string `json:"resource"`
	// Phase is Resolving, NotFound, Syncing, Restored or Synced.
	Phase           string `json:"phase"`
	Synced          bool   `json:"synced"`
	ResourceVersion string `json:"resourceVersion"`
	Objects         int    `json:"objects"`
	// StalenessSeconds is the time since the last event or bookmark from
	// the API server; absent before the first.
	StalenessSeconds *float64 `json:"stalenessSeconds,omitempty"`
	// UpstreamProblem is the last list or watch error, or a change that
	// could not be cached; it clears when changes flow again.
	UpstreamProblem string `json:"upstreamProblem,omitempty"`
	// Upstream is absent until the resource is resolved.
	Upstream *Upstream `json:"upstream,omitempty"`
	// RestoredAgeSeconds is, while Phase is Restored, the age of the state
	// the cache was restored from: how old what it serves may be.
	RestoredAgeSeconds *float64 `json:"restoredAgeSeconds,omitempty"`
	// State describes the resource's durable state; absent without
	// --state-dir.
	State *State `json:"state,omitempty"`
	// Consistency is the integrity checks against the API server; absent
	// before the first one.
	Consistency *Consistency `json:"consistency,omitempty"`
	// Memory is what the cached objects take (--cache-compression).
	Memory Memory `json:"memory"`
}

// Memory is what a resource's cached objects take in a Report
// (informerd_cache_object_bytes, informerd_cache_stored_objects).
type Memory struct {
	// Compression is the --cache-compression mode: off or cold.
	Compression string `json:"compression"`
	// JSONBytes adds up the objects' JSON as served; StoredBytes what it
	// takes in memory, compressed for the cold objects.
	JSONBytes   int64 `json:"jsonBytes"`
	StoredBytes int64 `json:"storedBytes"`
	// StoredPerObject is StoredBytes per object; 0 without objects.
	StoredPerObject int64 `json:"storedBytesPerObject"`
	// Hot and Cold count the objects held as JSON and compressed.
	Hot  int `json:"hot"`
	Cold int `json:"cold"`
	// DictionaryBytes is the current compression dictionary's size;
	// Damaged counts the reads that found a cold object damaged.
	DictionaryBytes int   `json:"dictionaryBytes,omitempty"`
	Damaged         int64 `json:"damaged,omitempty"`
}

// Consistency is a resource's integrity checks in a Report
// (informerd_cache_consistency_checks_total).
type Consistency struct {
	// Checks counts the checks by result: match, mismatch, skipped, error.
	Checks map[string]int64 `json:"checks"`
	// Inconsistent is set by a mismatch and cleared by the next match;
	// LastMismatch is the last check that found a difference.
	Inconsistent bool   `json:"inconsistent"`
	LastMismatch *Check `json:"lastMismatch,omitempty"`
	// Last is the last check that compared, or failed.
	Last Check `json:"last"`
}

// Check is one integrity check.
type Check struct {
	Result          string    `json:"result"`
	At              time.Time `json:"at"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Objects         int       `json:"objects"`
	// TookSeconds is how long the check ran, its pages' pauses included.
	TookSeconds float64 `json:"tookSeconds"`
	// Differences counts the keys that differed; First names the first.
	Differences int      `json:"differences,omitempty"`
	First       []string `json:"first,omitempty"`
	// Reason says why a check was skipped or failed.
	Reason string `json:"reason,omitempty"`
}

// State is a resource's durable state (--state-dir) in a Report.
type State struct {
	// WrittenResourceVersion is the resourceVersion the state on disk
	// reaches.
	WrittenResourceVersion string `json:"writtenResourceVersion"`
	// LagEvents counts the cached changes not yet written.
	LagEvents int64 `json:"lagEvents"`
	// Problem is the last failed write (a full disk, an I/O error), a
	// warning: serving goes on and the write is retried. It clears on the
	// next successful write.
	Problem string `json:"problem,omitempty"`
	// SetAside is why the state found at start was refused and moved aside.
	SetAside string `json:"setAside,omitempty"`
}

// Upstream counts, since informerd started, what happened between it and
// the API server for one resource (the informerd_upstream_* and
// informerd_cache_ingest_errors_total metrics).
type Upstream struct {
	// Relists counts full lists, the first one included.
	Relists int64 `json:"relists"`
	// WatchStarts counts watch requests; more than one means the watch was
	// restarted.
	WatchStarts int64 `json:"watchStarts"`
	// Expired counts 410 Gone answers.
	Expired int64 `json:"expired"`
	// Errors counts failed lists and watches of any kind.
	Errors int64 `json:"errors"`
	// EncodeErrors and QueueErrors count changes that could not be encoded
	// or queued; each was recovered by listing again.
	EncodeErrors int64 `json:"encodeErrors"`
	QueueErrors  int64 `json:"queueErrors"`
}

// Readyz answers 200 once every resource has synced, else 503. The body is
// a Report: as JSON when the request asks for it (?format=json, or an
// Accept header that prefers application/json to text/plain), else as text,
// one line per resource: phase, resourceVersion, objects, seconds since
// the last upstream event, and the upstream problem if there is one.
func Readyz(caches Caches) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asJSON, err := wantsJSON(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep := report(caches, time.Now())
		code := http.StatusOK
		if !rep.Ready {
			code = http.StatusServiceUnavailable
		}
		if asJSON {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(rep)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		writeText(w, rep)
	})
}

// report reads every pipeline's state at now.
func report(caches Caches, now time.Time) Report {
	rep := Report{Ready: true, Resources: []Resource{}}
	for _, p := range caches.Reports() {
		st := p.Status
		r := Resource{
			Name: st.Configured, Resource: st.Name, Phase: string(st.Phase), Synced: st.Cache.Synced,
			ResourceVersion: st.Cache.ResourceVersion, Objects: st.Cache.Objects, UpstreamProblem: st.LastError,
		}
		if sig := p.Upstream; sig != nil {
			if last := sig.LastEventTime(); !last.IsZero() {
				s := now.Sub(last).Seconds()
				r.StalenessSeconds = &s
			}
			r.Upstream = &Upstream{
				Relists: sig.Relists.Load(), WatchStarts: sig.WatchStarts.Load(), Expired: sig.Expired.Load(),
				Errors: sig.Errors.Load(), EncodeErrors: sig.EncodeErrors.Load(), QueueErrors: sig.QueueErrors.Load(),
			}
		}
		if st.Phase == pipeline.Restored {
			age := now.Sub(st.RestoredFrom).Seconds()
			r.RestoredAgeSeconds = &age
		}
		if s := p.State; s != nil {
			r.State = &State{WrittenResourceVersion: s.Written, LagEvents: s.LagEvents, Problem: s.LastError, SetAside: s.SetAside}
		}
		r.Memory = Memory{
			Compression: p.Compression.Mode, JSONBytes: st.Cache.RawBytes, StoredBytes: st.Cache.StoredBytes,
			Hot: st.Cache.Objects - st.Cache.Cold, Cold: st.Cache.Cold,
			DictionaryBytes: p.Compression.Codec.DictBytes, Damaged: p.Compression.Codec.Damaged,
		}
		if st.Cache.Objects > 0 {
			r.Memory.StoredPerObject = st.Cache.StoredBytes / int64(st.Cache.Objects)
		}
		if c := p.Consistency; c.Last.Result != "" {
			r.Consistency = &Consistency{Checks: c.Counts, Inconsistent: c.Inconsistent, Last: check(c.Last)}
			if c.LastMismatch.Result != "" {
				m := check(c.LastMismatch)
				r.Consistency.LastMismatch = &m
			}
		}
		rep.Ready = rep.Ready && r.Synced
		rep.Resources = append(rep.Resources, r)
	}
	return rep
}

// check is an integrity check as a Report shows it.
func check(r pipeline.CheckResult) Check {
	return Check{
		Result: r.Result, At: r.At, ResourceVersion: r.ResourceVersion, Objects: r.Objects, TookSeconds: r.Took.Seconds(),
		Differences: r.Differences, First: r.Diff, Reason: r.Reason,
	}
}

func writeText(w io.Writer, rep Report) {
	if !rep.Ready {
		fmt.Fprint(w, "not ready: waiting for the first list of every resource\n")
	}
	for _, r := range rep.Resources {
		fmt.Fprintf(w, "%s: %s rv=%s objects=%d", r.Name, r.Phase, r.ResourceVersion, r.Objects)
		if r.StalenessSeconds != nil {
			fmt.Fprintf(w, " last-upstream-event=%.0fs-ago", *r.StalenessSeconds)
		}
		if r.RestoredAgeSeconds != nil {
			fmt.Fprintf(w, " restored-age=%.0fs", *r.RestoredAgeSeconds)
		}
		if r.UpstreamProblem != "" {
			fmt.Fprintf(w, " upstream-problem=%q", r.UpstreamProblem)
		}
		if c := r.Consistency; c != nil {
			fmt.Fprintf(w, " last-check=%s", c.Last.Result)
			if m := c.LastMismatch; c.Inconsistent && m != nil {
				fmt.Fprintf(w, " inconsistent=%q", fmt.Sprintf("%d objects differed from the API server at resourceVersion %s (first: %s); listed again",
					m.Differences, m.ResourceVersion, strings.Join(m.First, "; ")))
			}
		}
		if m := r.Memory; m.Cold > 0 {
			fmt.Fprintf(w, " stored=%d/%d-bytes cold=%d/%d", m.StoredBytes, m.JSONBytes, m.Cold, m.Hot+m.Cold)
		}
		if m := r.Memory; m.Damaged > 0 {
			fmt.Fprintf(w, " damaged-reads=%d", m.Damaged)
		}
		if r.State != nil && r.State.Problem != "" {
			fmt.Fprintf(w, " state-problem=%q", r.State.Problem)
		}
		fmt.Fprintln(w)
	}
}

// wantsJSON says whether a request asks for the JSON Report: ?format=json,
// or an Accept header that names application/json with a higher quality
// than text/plain. Wildcards do not count: probes and curl send */* and
// get the text they always got.
func wantsJSON(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "json":
		return true, nil
	case "text":
		return false, nil
	case "":
	default:
		return false, fmt.Errorf("unknown format %q: use format=json or format=text", f)
	}
	var jsonQ, textQ float64
	for _, part := range strings.Split(strings.Join(r.Header.Values("Accept"), ","), ",") {
		mediaType, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		switch mediaType {
		case "application/json":
			jsonQ = max(jsonQ, q)
		case "text/plain":
			textQ = max(textQ, q)
		}
	}
	return jsonQ > textQ, nil
}

// SyncGRPC sets the gRPC health status to SERVING once every cache has
// synced, and keeps it there; it returns when ctx is done.
func SyncGRPC(ctx context.Context, caches Caches, h *health.Server, log *slog.Logger) error {
	if caches.WaitSynced(ctx) != nil {
		return nil
	}
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	log.Info("every resource has synced; serving")
	<-ctx.Done()
	return nil
}
