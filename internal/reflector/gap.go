package reflector

import "sync"

// gap records that the queue missed a change a watch delivered (or a whole
// list): from then until a full list is queued, the cache lacks a change
// that client-go's Reflector has seen and would resume after. So the watch
// that delivered it must end and make the Reflector list again, no watch
// may resume from after it, and nothing after it is queued (the list
// brings it too). The zero value has no gap. Its methods may be called
// concurrently.
type gap struct {
	mu      sync.Mutex
	missing bool
	next    chan struct{} // closed by the next record
}

// closed ends at once a watch that starts while a change is missing.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// record opens the gap: the watches waiting on it end.
func (g *gap) record() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.missing = true
	if g.next != nil {
		close(g.next)
		g.next = nil
	}
}

// fill closes the gap: a full list was queued.
func (g *gap) fill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.missing = false
}

// open reports whether a change is missing.
func (g *gap) open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.missing
}

// watchEnd returns the channel that ends a watch starting now: closed
// already when a change is missing, unless the watch starts with a
// streaming list, whose end fills the gap; otherwise closed when the next
// change is missed.
func (g *gap) watchEnd(streamingList bool) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.missing && !streamingList {
		return closed
	}
	if g.next == nil {
		g.next = make(chan struct{})
	}
	return g.next
}
