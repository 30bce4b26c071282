package main

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

// readyz answers 200 once every resource has synced, else 503 naming those
// that have not and why.
func readyz(caches *pipeline.Set) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		ready := true
		for _, p := range caches.Pipelines() {
			st := p.Status()
			line := fmt.Sprintf("%s: %s rv=%s objects=%d", st.Name, st.Phase, st.Cache.ResourceVersion, st.Cache.Objects)
			if st.LastError != "" {
				line += " last error: " + st.LastError
			}
			fmt.Fprintln(&b, line)
			ready = ready && st.Cache.Synced
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "not ready: waiting for the first list of every resource\n")
		}
		fmt.Fprint(w, b.String())
	})
}

// reportSynced sets the gRPC health status to SERVING once every cache has
// synced. A cache never becomes unsynced, so it then returns... only at
// shutdown, to keep run.Group's contract that actors run until interrupted.
func reportSynced(ctx context.Context, caches *pipeline.Set, h *health.Server, log *slog.Logger) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if ok, _ := caches.Synced(); ok {
			h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			log.Info("every resource has synced; serving")
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
