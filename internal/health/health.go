// Package health answers "is informerd alive and ready": the HTTP /healthz
// and /readyz endpoints and the gRPC health status, all from the caches'
// state. Ready means every resource has synced once; an upstream outage
// after that does not make informerd unready — it keeps serving its cache —
// but /readyz names the problem.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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

// Readyz answers 200 once every resource has synced, else 503. The body has
// one line per resource: phase, resourceVersion, objects, seconds since the
// last upstream event, and the last list/watch error if there is one.
func Readyz(caches Caches) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		ready := true
		for _, r := range caches.Reports() {
			st := r.Status
			fmt.Fprintf(&b, "%s: %s rv=%s objects=%d", st.Configured, st.Phase, st.Cache.ResourceVersion, st.Cache.Objects)
			if sig := r.Upstream; sig != nil {
				if last := sig.LastEventTime(); !last.IsZero() {
					fmt.Fprintf(&b, " last-upstream-event=%.0fs-ago", time.Since(last).Seconds())
				}
			}
			if st.LastError != "" {
				fmt.Fprintf(&b, " upstream-problem=%q", st.LastError)
			}
			b.WriteByte('\n')
			ready = ready && st.Cache.Synced
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "not ready: waiting for the first list of every resource\n")
		}
		fmt.Fprint(w, b.String())
	})
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
