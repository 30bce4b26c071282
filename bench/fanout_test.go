package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckReceipts(t *testing.T) {
	acks := map[string]time.Time{"10": {}, "11": {}}
	ours := [][]receipt{{{rv: "10"}}, {{rv: "11"}, {rv: "10"}}}
	w := &watchers{}
	if err := checkReceipts("informerd", w, ours, acks); err != nil {
		t.Fatalf("the phase's own writes: %v", err)
	}
	if err := checkReceipts("informerd", w, [][]receipt{{{rv: "10"}, {rv: "9"}}}, acks); err == nil || !strings.Contains(err.Error(), "resourceVersion 9") {
		t.Errorf("an event from before the phase: got %v, want an error naming resourceVersion 9", err)
	}
	if err := checkReceipts("floor", w, [][]receipt{{{rv: "123456789"}}}, nil); err != nil {
		t.Errorf("the floor's events (no acks): %v", err)
	}

	w.fail(3, errors.New("rpc error: code = Unavailable"))
	w.fail(7, errors.New("EOF"))
	err := checkReceipts("informerd", w, ours, acks)
	if err == nil || !strings.Contains(err.Error(), "watcher 3's stream ended") || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("a stream that ended early: got %v, want the first one's error", err)
	}
	if n := w.ended.Load(); n != 2 {
		t.Errorf("streams ended: %d, want 2", n)
	}
}

func TestPhaseDuration(t *testing.T) {
	b := &bench{watchers: []int{10, 1000}, phaseTime: 15 * time.Second, pacedTime: time.Minute}
	paced, max := phase{"100/s", 100}, phase{"max", 0}
	for _, c := range []struct {
		n    int
		ph   phase
		want time.Duration
	}{
		{1000, paced, time.Minute},
		{1000, max, 15 * time.Second},
		{10, paced, 15 * time.Second},
		{0, paced, 15 * time.Second},
	} {
		if got := b.phaseDuration(c.n, c.ph); got != c.want {
			t.Errorf("%d watchers, %s: %v, want %v", c.n, c.ph.name, got, c.want)
		}
	}
	b.pacedTime = 0
	if got := b.phaseDuration(1000, paced); got != 15*time.Second {
		t.Errorf("without a paced time: %v, want the phase time", got)
	}
}

func TestPodsOnNode(t *testing.T) {
	// loadPods puts pod i on node i mod nodes.
	for _, tt := range []struct {
		name           string
		i, pods, nodes int
		want           int
	}{
		{"even", 7, 2000, 100, 20},
		{"a node with one more", 1, 10, 3, 3},
		{"the first node", 3, 10, 3, 4},
		{"the last node", 2, 10, 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := 0
			for j := range tt.pods {
				if nodeName(j, tt.nodes) == nodeName(tt.i, tt.nodes) {
					want++
				}
			}
			if want != tt.want {
				t.Fatalf("the case is wrong: %d pods on the node, not %d", want, tt.want)
			}
			if got := podsOnNode(tt.i, tt.pods, tt.nodes); got != tt.want {
				t.Errorf("podsOnNode(%d, %d, %d) = %d, want %d", tt.i, tt.pods, tt.nodes, got, tt.want)
			}
		})
	}
}
