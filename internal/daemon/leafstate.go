package daemon

import (
	"fmt"
	"log/slog"

	"github.com/informerd/informerd/internal/state"
)

// openLeafState opens and locks --state-dir for a leaf, nil without the
// flag. A leaf's state belongs to its upstream informerd, not to an API
// server (state.UpstreamIdentity): restarted, the leaf restores its cache,
// serves it at once and resumes its watch of the upstream from the saved
// resourceVersion, which every root replica shares, instead of listing its
// part again.
func openLeafState(o Options, log *slog.Logger) (*state.Dir, error) {
	if o.StateDir == "" {
		return nil, nil
	}
	id, err := state.UpstreamIdentity(o.Upstream.Address, o.Upstream.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	return state.Open(state.Options{
		Dir: o.StateDir, FlushInterval: o.StateFlushInterval, FlushEvents: o.StateFlushEvents,
		Identity: id, Log: log.With("component", "state"),
	})
}
