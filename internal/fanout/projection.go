package fanout

import (
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/projection"
)

// DefaultMaxProjections bounds the distinct field masks a hub's watchers
// use at once, unless Options set another bound.
const DefaultMaxProjections = 32

// TooManyProjectionsError refuses a watch whose field mask would be one
// more distinct mask than the hub allows.
type TooManyProjectionsError struct {
	Limit int
}

func (e *TooManyProjectionsError) Error() string {
	return fmt.Sprintf("fanout: %d distinct field masks are in use on this resource, the most allowed; watch with one of the masks in use, or with none", e.Limit)
}

// shared is one field mask's projection of the live events, shared by every
// watcher with that mask: each event's object is projected once for all of
// them. refs is guarded by Hub.mu; the memo is used only by the goroutine
// that calls OnEvent, one event at a time.
type shared struct {
	mask *projection.Mask
	refs int

	seq      uint64         // the event the memo is for
	obj      *object.Object // its object, projected; nil until needed
	proj     projection.Projected
	compared bool // whether same has been found for seq
	same     bool // the event changes nothing the mask keeps
}

// projectionStats counts a hub's projections for metrics.
type projectionStats struct {
	encodes  atomic.Int64 // objects projected for sending
	compared atomic.Int64 // earlier states projected to find a change
}

// acquireLocked gives w the shared projection of its mask, creating it
// within the hub's bound. The caller holds h.mu.
func (h *Hub) acquireLocked(w *Watcher) error {
	m := w.opts.Mask
	if m == nil {
		return nil
	}
	s := h.projections[m.Key()]
	if s == nil {
		if len(h.projections) >= h.opts.MaxProjections {
			return &TooManyProjectionsError{Limit: h.opts.MaxProjections}
		}
		s = &shared{mask: m}
		h.projections[m.Key()] = s
	}
	s.refs++
	w.shared = s
	return nil
}

// releaseLocked drops w's hold on its shared projection, once: the caller
// holds h.mu and calls it only while w is registered. w.shared is left as
// it is, for a dispatch that read w before it was removed.
func (h *Hub) releaseLocked(w *Watcher) {
	s := w.shared
	if s == nil {
		return
	}
	if s.refs--; s.refs == 0 {
		delete(h.projections, s.mask.Key())
	}
}

// project turns it, what a live event means to a watcher, into what the
// watcher's mask shows of it, once per event for every watcher sharing s:
// the object projected, or nothing for a MODIFIED that changes no field the
// mask keeps. Selection (it.Type) was decided on the whole object.
func (s *shared) project(ev indexer.Event, it Item, st *projectionStats) (Item, bool) {
	if s.seq != ev.Seq {
		s.seq, s.obj, s.compared = ev.Seq, nil, false
	}
	if s.obj == nil {
		s.obj, s.proj = projectObject(s.mask, ev.Object, st)
	}
	if it.Type == watch.Modified {
		if !s.compared {
			s.compared = true
			s.same = unchanged(s.mask, ev.Prev, s.proj, st)
		}
		if s.same {
			return Item{}, false
		}
	}
	it.Object = s.obj
	return it, true
}

// projectAlone is project for one watcher, without sharing: for replays
// from history and initial events, which no other watcher reads at that
// moment. It decides exactly as project does.
func projectAlone(m *projection.Mask, ev indexer.Event, it Item, st *projectionStats) (Item, bool) {
	if m == nil {
		return it, true
	}
	obj, p := projectObject(m, ev.Object, st)
	if it.Type == watch.Modified && unchanged(m, ev.Prev, p, st) {
		return Item{}, false
	}
	it.Object = obj
	return it, true
}

// projectObject projects o. An object the mask cannot be applied to (its
// JSON would have to be broken, which the cache never holds) is sent
// whole rather than lost.
func projectObject(m *projection.Mask, o *object.Object, st *projectionStats) (*object.Object, projection.Projected) {
	st.encodes.Add(1)
	json, err := o.Bytes()
	if err != nil {
		// Never a live event's object, which is hot; a damaged cold one
		// is sent as it is, and its reader gets the error.
		return o, projection.Projected{}
	}
	p, err := m.ProjectObject(json)
	if err != nil {
		return o, projection.Projected{JSON: json}
	}
	return o.WithJSON(p.JSON), p
}

// unchanged reports whether the mask shows no change from prev to the
// state projected as cur.
func unchanged(m *projection.Mask, prev *object.Object, cur projection.Projected, st *projectionStats) bool {
	if prev == nil {
		return false
	}
	st.compared.Add(1)
	json, err := prev.Bytes()
	if err != nil || cur.JSON == nil {
		return false // a damaged earlier state: say the change
	}
	p, err := m.ProjectObject(json)
	return err == nil && p.SameBut(cur)
}
