package fanout

import (
	"cmp"
	"context"

	"sync"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/projection"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchOptions choose how a watcher starts and behaves when slow.
type WatchOptions struct {
	Selection Selection
	// ResourceVersion: deliver every change after it ("" = from now).
	ResourceVersion string
	// SendInitialEvents: first the selected objects as ADDED, then changes.
	SendInitialEvents bool
	AllowBookmarks    bool
	// Coalesce: collapse pending changes per object instead of replaying
	// from history when the queue is full; never ended for being slow.
	Coalesce bool
	// QueueLength bounds the watcher's queue of undelivered events (past
	// it, Next replays from history); 0 means the hub's default.
	QueueLength int
	// Mask, when not nil, is the fields of each object to send: objects
	// are projected (once per event for every watcher with the same mask)
	// and a MODIFIED that changes none of them is not sent. Selection is
	// decided on the whole object.
	Mask *projection.Mask
}

// replayChunk bounds the events a lagging watcher copies from the cache's
// history at a time, and so its memory and how long it holds the cache's
// read lock.
const replayChunk = 256

// Watcher is one watch stream's view of the hub. Poll, Next and
// IdleBookmark are called by one goroutine (the stream's); the hub delivers
// from the indexer's dispatching goroutine; Ready, SentResourceVersion and
// Close may be called from any goroutine. See Hub for the lock order.
type Watcher struct {
	hub  *Hub
	opts WatchOptions

	mu sync.Mutex
	q  queue
	// lagging: the queue overflowed (or the watch resumed from a
	// resourceVersion); Next reads the cache's history from pos, a chunk
	// at a time, until it has caught up with the live stream.
	lagging bool
	// pos is the Seq of the last event queued, skipped or replayed, and
	// lastRV the resourceVersion there; events at or before pos are the
	// client's already.
	pos             uint64
	joined          uint64 // pos at the join: fixed, for tests and debugging
	lastRV          string
	sentRV          string // RV of the last item Next returned
	pendingBookmark string // RV of a bookmark to send once the queue is empty
	err             error  // set when ended
	notify          chan struct{}
	// resumed: nothing has been sent since the watch resumed from a
	// resourceVersion; a replay that finds its events gone then refuses
	// the resourceVersion as too old rather than ending a slow stream.
	resumed bool

	stamp uint64 // the last event's Seq the hub visited it for; guarded by hub.mu
	// shared projects the live events for this watcher's mask; set before
	// the watcher is registered (under Hub.mu), never changed after.
	shared *shared
}

// Watch registers a watcher and returns it with the items to send first
// (with SendInitialEvents, the selected objects as ADDED) and the RV they
// bring the client to. A watch from a ResourceVersion starts lagging: Next
// replays the events after it from history, a chunk at a time.
func (h *Hub) Watch(opts WatchOptions) (w *Watcher, initial []Item, at string, err error) {
	w = &Watcher{hub: h, opts: opts, notify: make(chan struct{}, 1)}
	if opts.Coalesce {
		w.q = newCoalescing(&h.coalesced)
	} else {
		limit := opts.QueueLength
		if limit <= 0 {
			limit = h.opts.QueueLength
		}
		w.q = &fifo{limit: limit}
	}
	// A coalescing watcher is never ended for being slow: its resume is
	// replayed at once into its queue, which holds one item per object,
	// rather than a chunk at a time from a history that may move on.
	start := indexer.Start{ResourceVersion: opts.ResourceVersion, NoReplay: !opts.Coalesce}
	if opts.SendInitialEvents {
		start = indexer.Start{Snapshot: true, Match: opts.Selection.Matches}
	}
	var closed, refused error
	err = h.ix.Join(start, func(j indexer.Joined) {
		for _, o := range j.Snapshot {
			initial = append(initial, Item{Type: watch.Added, Object: o, ResourceVersion: j.At.ResourceVersion})
		}
		for _, ev := range j.Replay {
			if it, ok := w.view(ev); ok {
				w.q.push(it, true)
			}
		}
		at = j.At.ResourceVersion
		w.pos, w.lastRV, w.sentRV = j.At.Seq, at, at
		if opts.ResourceVersion != "" && !opts.SendInitialEvents {
			w.sentRV = opts.ResourceVersion
		}
		if j.From.Seq < j.At.Seq {
			w.lagging, w.resumed = true, true
			w.pos, w.lastRV = j.From.Seq, j.From.ResourceVersion
		}
		w.joined = w.pos
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed != nil {
			closed = h.closed
			return
		}
		if refused = h.acquireLocked(w); refused != nil {
			return
		}
		h.addLocked(w)
	})
	if err == nil {
		err = cmp.Or(closed, refused)
	}
	if err != nil {
		return nil, nil, "", err
	}
	// Projected outside the cache's lock, for this watcher alone.
	for i, it := range initial {
		initial[i], _ = projectAlone(opts.Mask, indexer.Event{Type: watch.Added, Object: it.Object}, it, &h.pstats)
	}
	return w, initial, at, nil
}

func (w *Watcher) buckets() []bucket {
	s := &w.opts.Selection
	if s.Index >= 0 {
		out := make([]bucket, 0, len(s.Values))
		for _, v := range s.Values {
			out = append(out, bucket{s.Index, v})
		}
		return out
	}
	if s.Namespace != "" {
		return []bucket{{0, s.Namespace}} // the namespace index
	}
	return nil
}

// view is what ev means to this watcher, decided alone: for replays,
// which decide exactly as the live delivery does.
func (w *Watcher) view(ev indexer.Event) (Item, bool) {
	it, ok := w.opts.Selection.translate(ev)
	if !ok {
		return it, false
	}
	return projectAlone(w.opts.Mask, ev, it, &w.hub.pstats)
}

func (w *Watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// deliver queues what ev means to this watcher; it never blocks.
func (w *Watcher) deliver(ev indexer.Event) {
	it, ok := w.opts.Selection.translate(ev)
	if ok && w.shared != nil {
		it, ok = w.shared.project(ev, it, &w.hub.pstats)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.lagging || ev.Seq <= w.pos {
		return
	}
	sameGroup := ev.ResourceVersion == w.lastRV
	if ok {
		if !w.q.push(it, sameGroup) {
			// Replay brings the client past any bookmark pending.
			w.lagging, w.pendingBookmark = true, ""
			w.wake()
			return
		}
		w.pendingBookmark = "" // the item itself moves the client past it
		w.wake()
	}
	w.pos, w.lastRV = ev.Seq, ev.ResourceVersion
}

// upstreamBookmark records that every event up to ev has been dispatched.
func (w *Watcher) upstreamBookmark(ev indexer.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.lagging || ev.Seq <= w.pos {
		return
	}
	w.pos, w.lastRV = ev.Seq, ev.ResourceVersion
	if w.opts.AllowBookmarks {
		w.pendingBookmark = ev.ResourceVersion
		w.wake()
	}
}

// IdleBookmark returns a BOOKMARK item at the latest resourceVersion this
// watcher has been fully served up to, if the watch allows bookmarks, nothing
// is pending and the client has not been told of it; the stream sends one
// when it has been idle a while. The item counts as sent. It offers none
// while the cache is dispatching a batch: the watcher may have passed the
// first events of a group sharing one resourceVersion (ones it does not
// select, or whose projection did not change) but not the rest, and a
// client resuming from that resourceVersion would miss them.
func (w *Watcher) IdleBookmark() (it Item, ok bool) {
	if !w.opts.AllowBookmarks {
		return Item{}, false
	}
	w.hub.ix.BetweenBatches(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.err != nil || w.lagging || w.q.len() > 0 || !after(w.lastRV, w.sentRV) {
			return
		}
		w.sentRV = w.lastRV
		it, ok = Item{Type: watch.Bookmark, ResourceVersion: w.lastRV}, true
	})
	return it, ok
}

// after reports whether resourceVersion a is newer than b ("" is oldest).
func after(a, b string) bool {
	if a == "" {
		return false
	}
	if b == "" {
		return true
	}
	x, _ := object.ParseRV(a)
	y, _ := object.ParseRV(b)
	return x > y
}

// Ready returns a channel that receives when Poll may have something new:
// items, a bookmark, or the watcher's end. It is the same channel for the
// watcher's life and holds at most one wake-up.
func (w *Watcher) Ready() <-chan struct{} { return w.notify }

// Poll returns the next items in order without waiting: what the queue
// holds, else the next chunk of a lagging watcher's replay, else a pending
// bookmark; nil when there is nothing. It returns the watcher's error once
// it has ended (ErrClosed, a *TooSlowError, ErrTooOld for a resumed watch
// whose resourceVersion left the history window); the caller Closes it when
// done.
func (w *Watcher) Poll() ([]Item, error) {
	for {
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return nil, err
		}
		if w.q.len() > 0 {
			items := w.q.popAll()
			w.sentRV = items[len(items)-1].ResourceVersion
			w.mu.Unlock()
			return items, nil
		}
		if w.lagging {
			w.mu.Unlock()
			// Bounded: at most the history's events, a chunk at a time.
			items, err := w.replay()
			if err != nil || len(items) > 0 {
				return items, err
			}
			continue
		}
		if rv := w.pendingBookmark; rv != "" {
			w.pendingBookmark = ""
			if after(rv, w.sentRV) { // never back, never the same twice
				w.sentRV = rv
				w.mu.Unlock()
				return []Item{{Type: watch.Bookmark, ResourceVersion: rv}}, nil
			}
		}
		w.mu.Unlock()
		return nil, nil
	}
}

// Next waits for items and returns them, as Poll does once it has any. It
// returns ctx's error without ending the watcher.
func (w *Watcher) Next(ctx context.Context) ([]Item, error) {
	for {
		items, err := w.Poll()
		if err != nil || len(items) > 0 {
			return items, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.notify:
		}
	}
}

// replay reads the next chunk of a lagging watcher's events from the
// cache's history; with the last chunk it rejoins the live stream, while no
// event can be applied. It ends the watcher when the history no longer
// holds the events it needs.
func (w *Watcher) replay() ([]Item, error) {
	w.mu.Lock()
	from := w.pos
	w.mu.Unlock()
	var items []Item
	err := w.hub.ix.ReplayAfter(from, replayChunk, func(evs []indexer.Event, caughtUp bool, at indexer.Position) {
		for _, ev := range evs {
			if it, ok := w.view(ev); ok {
				items = append(items, it)
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.pos, w.lastRV = at.Seq, at.ResourceVersion
		if caughtUp {
			w.lagging, w.pendingBookmark = false, ""
		}
		if len(items) > 0 {
			w.sentRV, w.resumed = items[len(items)-1].ResourceVersion, false
		}
	})
	if err != nil {
		w.mu.Lock()
		sent, resumed := w.sentRV, w.resumed
		w.mu.Unlock()
		if resumed {
			// The client's own resourceVersion has left the window before
			// anything was sent: it must list again, as if refused at once.
			w.end(err)
			return nil, err
		}
		tooSlow := &TooSlowError{LastResourceVersion: sent}
		w.end(tooSlow)
		return nil, tooSlow
	}
	return items, nil
}

// end stops the watcher with err; Next returns it from now on.
func (w *Watcher) end(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
		w.q.popAll()
	}
	w.mu.Unlock()
	w.wake()
	w.hub.remove(w)
}

// Close unregisters the watcher. It is idempotent.
func (w *Watcher) Close() { w.end(ErrClosed) }

// SentResourceVersion is the RV of the last item Next returned.
func (w *Watcher) SentResourceVersion() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sentRV
}
