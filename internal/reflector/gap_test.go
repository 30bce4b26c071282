package reflector

import "testing"

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestGap: a missed change ends the watches running and any that starts
// before a list fills the gap, except a streaming list, which fills it.
func TestGap(t *testing.T) {
	var g gap
	running := g.watchEnd(false)
	streaming := g.watchEnd(true)
	if isClosed(running) || isClosed(streaming) || g.open() {
		t.Fatal("watches end before any change is missed")
	}
	g.record()
	if !isClosed(running) || !isClosed(streaming) || !g.open() {
		t.Fatal("a missed change does not end the running watches")
	}
	if !isClosed(g.watchEnd(false)) {
		t.Error("a watch that starts while a change is missing does not end at once")
	}
	list := g.watchEnd(true)
	if isClosed(list) {
		t.Error("a streaming list that starts while a change is missing ends at once; its end fills the gap")
	}
	g.fill()
	after := g.watchEnd(false)
	if isClosed(after) || g.open() {
		t.Error("a watch ends after the gap was filled")
	}
	g.record()
	if !isClosed(list) || !isClosed(after) {
		t.Error("the next missed change does not end the watches")
	}
}
