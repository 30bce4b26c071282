package indexer

import (
	"sort"
	"time"
)

// history is a ring of the most recent events, bounded by count and by age,
// from which a watcher can resume. It is guarded by the Indexer's lock.
type history struct {
	events []Event // ring buffer, len == capacity
	start  int     // index of the oldest event
	n      int     // events held
	maxAge time.Duration
	// floor is the RV just before the oldest event held: Since(rv) can
	// answer for any rv >= floor. floorSeq is the Seq of the last event
	// dropped (or of the position the history was reset at): after(seq)
	// can answer for any seq >= floorSeq.
	floor, floorSeq uint64
}

func newHistory(maxEvents int, maxAge time.Duration) *history {
	if maxEvents < 1 {
		maxEvents = 1
	}
	return &history{events: make([]Event, maxEvents), maxAge: maxAge}
}

func (h *history) at(i int) *Event { return &h.events[(h.start+i)%len(h.events)] }

// reset empties the history; it now answers from rv (and seq) on.
func (h *history) reset(rv, seq uint64) {
	clear(h.events)
	h.start, h.n, h.floor, h.floorSeq = 0, 0, rv, seq
}

func (h *history) append(ev Event) {
	if h.n == len(h.events) {
		h.dropOldest()
	}
	h.events[(h.start+h.n)%len(h.events)] = ev
	h.n++
}

// dropOldest drops the oldest event and any that share its RV (a relist's
// deletes do), so the floor never falls inside a group: resuming from the
// floor then misses nothing.
func (h *history) dropOldest() {
	rv := h.at(0).RV
	for h.n > 0 && h.at(0).RV == rv {
		h.floorSeq = h.at(0).Seq
		*h.at(0) = Event{}
		h.start = (h.start + 1) % len(h.events)
		h.n--
	}
	h.floor = rv
}

// expire drops events applied before now-maxAge.
func (h *history) expire(now time.Time) {
	if h.maxAge <= 0 {
		return
	}
	cutoff := now.Add(-h.maxAge)
	for h.n > 0 && h.at(0).Applied.Before(cutoff) {
		h.dropOldest()
	}
}

// since returns the events with RV > rv, oldest first, or ok=false when rv is
// older than the window.
func (h *history) since(rv uint64) (out []Event, ok bool) {
	if rv < h.floor {
		return nil, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).RV > rv })
	out = make([]Event, 0, h.n-i)
	for ; i < h.n; i++ {
		out = append(out, *h.at(i))
	}
	return out, true
}

// seqAt returns the Seq of the position just after every event with an RV
// at or below rv, or ok=false when rv is older than the window.
func (h *history) seqAt(rv uint64) (seq uint64, ok bool) {
	if rv < h.floor {
		return 0, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).RV > rv })
	if i == 0 {
		return h.floorSeq, true
	}
	return h.at(i - 1).Seq, true
}

// after returns up to about limit (at least one) events with a Seq above
// seq, oldest first, extended to the end of the last one's group (the
// events that share its RV); ok=false when seq is older than the window.
func (h *history) after(seq uint64, limit int) (out []Event, ok bool) {
	if seq < h.floorSeq {
		return nil, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).Seq > seq })
	end := min(h.n, i+max(limit, 1))
	for end < h.n && end > i && h.at(end).RV == h.at(end-1).RV {
		end++
	}
	out = make([]Event, 0, end-i)
	for ; i < end; i++ {
		out = append(out, *h.at(i))
	}
	return out, true
}

// lastSeq is the Seq of the newest event held, or floorSeq when none is.
func (h *history) lastSeq() uint64 {
	if h.n == 0 {
		return h.floorSeq
	}
	return h.at(h.n - 1).Seq
}
