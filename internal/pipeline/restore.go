package pipeline

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/state"
)

// restore loads the resource's durable state into its cache, when there is
// one that passes every check. It returns what the resource resolved to
// and the resourceVersion to resume the upstream watch from; "" when it
// starts cold (no state, or one set aside). The cache is served from the
// moment it returns.
func (p *Pipeline) restore() (Resolved, string) {
	if p.state == nil {
		return Resolved{}, ""
	}
	start := time.Now()
	l, err := p.state.Load(p.decode, start)
	var aside *state.SetAsideError
	switch {
	case errors.As(err, &aside):
		p.setPhase(Resolving, fmt.Errorf("started cold: %w", err))
		return Resolved{}, ""
	case err != nil:
		p.log.Error("the saved state could not be read; starting cold", "err", err)
		return Resolved{}, ""
	case l == nil:
		p.log.Info("no saved state; starting cold", "stateDir", p.state.Path())
		return Resolved{}, ""
	}
	res := Resolved{
		GVR:        schema.GroupVersionResource{Group: l.Resolved.Group, Version: l.Resolved.Version, Resource: l.Resolved.Resource},
		Kind:       l.Resolved.Kind,
		Namespaced: l.Resolved.Namespaced,
	}
	// Resolved before the cache fills: a read that finds the resource now
	// waits for the cache (not synced until Restore returns), where one
	// that did not would be forwarded without the caller's credentials.
	p.mu.Lock()
	p.resolved = res
	p.mu.Unlock()
	if err := p.index.Restore(l.Cache); err != nil {
		// Load checked what Restore does; this is a bug, not bad data.
		p.log.Error("the saved state could not be restored; starting cold", "err", err)
		_ = p.state.Discard(err.Error())
		p.mu.Lock()
		p.resolved = Resolved{}
		p.mu.Unlock()
		return Resolved{}, ""
	}
	p.mu.Lock()
	p.restoredFrom = l.SavedAt
	p.mu.Unlock()
	p.log.Info("restored the cache from the saved state; serving it while the watch resumes",
		"resourceVersion", l.Cache.At.ResourceVersion, "objects", len(l.Cache.Objects), "historyEvents", len(l.Cache.Events),
		"savedAt", l.SavedAt, "age", start.Sub(l.SavedAt).Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return res, l.Cache.At.ResourceVersion
}

// ErrForeignState ends a pipeline whose restored cache turned out to belong
// to another etcd history than the API server's: it must not be served,
// and its resourceVersions cannot be reconciled with the API server's.
// informerd stops with it (the state set aside), so that its restart
// starts cold.
var ErrForeignState = errors.New("the restored state belongs to another etcd history than the API server's")

// foreign sets the state aside and returns the error that stops the
// pipeline.
func (p *Pipeline) foreign(err error) error {
	p.log.Error("the restored cache belongs to another etcd history; setting the state aside and stopping informerd, which starts cold when restarted", "err", err)
	_ = p.state.Discard(err.Error())
	return fmt.Errorf("resource %s: %w: %w; it was set aside, start informerd again to start cold", p.cfg.Resource, ErrForeignState, err)
}

// decode turns stored JSON back into a cached object with the current
// indexes.
func (p *Pipeline) decode(b []byte) (*object.Object, error) {
	raw, err := object.ParseRaw(b)
	if err != nil {
		return nil, err
	}
	return p.encoder.Encode(raw)
}

// confirm records that the API server confirmed the restored cache.
func (p *Pipeline) confirm() {
	if p.restoredAt().IsZero() || p.confirmed.Swap(true) {
		return
	}
	p.log.Info("the API server confirmed the restored cache", "resourceVersion", p.index.Stats().ResourceVersion)
}

func (p *Pipeline) restoredAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restoredFrom
}

// stateResolved is res as the durable state records it.
func stateResolved(res Resolved) state.Resolved {
	return state.Resolved{Group: res.GVR.Group, Version: res.GVR.Version, Resource: res.GVR.Resource, Kind: res.Kind, Namespaced: res.Namespaced}
}
