package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fleetStats are a bench/fleet child's counts (its Stats), summed over
// the fleet's children.
type fleetStats struct {
	Received int64 `json:"received"`
	Watches  int64 `json:"watches"`
	Lists    int64 `json:"lists"`
	Refused  int64 `json:"refused"`
	Failed   int64 `json:"failed"`
	Errors   int64 `json:"errors"`
	Resumed  int   `json:"resumed"`
	Relisted int   `json:"relisted"`
	// RefusedBy counts the refused requests by status code; Refusals
	// holds the first request of each code with its answer.
	RefusedBy map[int]int64  `json:"refusedBy,omitempty"`
	Refusals  map[int]string `json:"refusals,omitempty"`
}

func (s *fleetStats) add(o fleetStats) {
	s.Received += o.Received
	s.Watches += o.Watches
	s.Lists += o.Lists
	s.Refused += o.Refused
	s.Failed += o.Failed
	s.Errors += o.Errors
	s.Resumed += o.Resumed
	s.Relisted += o.Relisted
	for code, n := range o.RefusedBy {
		if s.RefusedBy == nil {
			s.RefusedBy = map[int]int64{}
		}
		s.RefusedBy[code] += n
	}
	for code, r := range o.Refusals {
		if s.Refusals == nil {
			s.Refusals = map[int]string{}
		}
		if _, ok := s.Refusals[code]; !ok {
			s.Refusals[code] = r
		}
	}
}

// informerFleet is n unmodified client-go pod informers spread over a
// few bench/fleet child processes, informer i on the pods of node
// i%nodes, so that the clients' CPU is not what bounds the server. Its
// methods are called by one goroutine.
type informerFleet struct {
	n, nodes int
	children []*child
	dir      string // where the children write their receipts
}

// startFleet starts n informers on the API server of kubeconfig (the pods
// of ns) in children processes at once, and returns once each has synced
// its node's pods (pods in all, spread as loadPods spreads them), or the
// error of the first child that did not within syncTimeout.
func startFleet(ctx context.Context, dir, kubeconfig, ns string, n, nodes, pods, children int, syncTimeout time.Duration) (*informerFleet, error) {
	children = max(1, min(children, n))
	f := &informerFleet{n: n, nodes: nodes, children: make([]*child, children), dir: dir}
	errs := make([]error, children)
	var wg sync.WaitGroup
	for c := range children {
		first, last := c*n/children, (c+1)*n/children
		wg.Go(func() {
			ch, err := startChild("fleet", "--kubeconfig="+kubeconfig, "--namespace="+ns, "--first="+strconv.Itoa(first),
				"--count="+strconv.Itoa(last-first), "--nodes="+strconv.Itoa(nodes), "--sync-timeout="+syncTimeout.String())
			if err != nil {
				errs[c] = err
				return
			}
			f.children[c] = ch
			want := 0
			for i := first; i < last; i++ {
				want += podsOnNode(i, pods, nodes)
			}
			if ch.report.Objects != want {
				errs[c] = fmt.Errorf("informers %d to %d synced %d pods, want %d", first, last-1, ch.report.Objects, want)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			f.close()
			return nil, err
		}
	}
	return f, ctx.Err()
}

func (f *informerFleet) pids() []int {
	var out []int
	for _, c := range f.children {
		out = append(out, c.pid())
	}
	return out
}

// ask sends command to every child and sums their stats answers.
func (f *informerFleet) ask(ctx context.Context, command string) (fleetStats, error) {
	var sum fleetStats
	for _, c := range f.children {
		line, err := c.ask(ctx, command)
		if err != nil {
			return sum, err
		}
		var s fleetStats
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return sum, fmt.Errorf("fleet %s: %q: %w", command, line, err)
		}
		sum.add(s)
	}
	return sum, nil
}

// stats are the counts since the last mark.
func (f *informerFleet) stats(ctx context.Context) (fleetStats, error) { return f.ask(ctx, "stats") }

// mark starts the counts again.
func (f *informerFleet) mark(ctx context.Context) error {
	_, err := f.ask(ctx, "mark")
	return err
}

// take returns and forgets what the informers were told so far, by the
// harness's informer number, as watchers.take does.
func (f *informerFleet) take(ctx context.Context) ([][]receipt, error) {
	got := make([][]receipt, f.n)
	for c, ch := range f.children {
		path := filepath.Join(f.dir, fmt.Sprintf("fleet-receipts-%d", c))
		line, err := ch.ask(ctx, "take "+path)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(line, `{"taken"`) {
			return nil, fmt.Errorf("fleet take: %s", line)
		}
		if err := readReceipts(path, got); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// readReceipts adds a child's receipts file to got.
func readReceipts(path string, got [][]receipt) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	defer os.Remove(path)
	s := bufio.NewScanner(file)
	for s.Scan() {
		var i int
		var rv string
		var ns int64
		if _, err := fmt.Sscan(s.Text(), &i, &rv, &ns); err != nil || i < 0 || i >= len(got) {
			return fmt.Errorf("receipts %s: line %q: %v", path, s.Text(), err)
		}
		got[i] = append(got[i], receipt{rv, time.Unix(0, ns)})
	}
	return s.Err()
}

// quiesce waits until the informers have been told nothing new for 500ms
// (at most 60s).
func (f *informerFleet) quiesce(ctx context.Context) {
	settle(func() int64 {
		s, err := f.stats(ctx)
		if err != nil {
			return -1
		}
		return s.Received
	})
}

func (f *informerFleet) close() {
	var wg sync.WaitGroup
	for _, c := range f.children {
		if c != nil {
			wg.Go(c.stop)
		}
	}
	wg.Wait()
}
