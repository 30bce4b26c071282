package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// fleet is the watchers of several servers (or of one, a set per node),
// measured as one.
type fleet []*watchers

func (f fleet) received() int64 {
	var n int64
	for _, w := range f {
		n += w.received.Load()
	}
	return n
}

// take returns and forgets what every watcher received so far.
func (f fleet) take() [][]receipt {
	var out [][]receipt
	for _, w := range f {
		out = append(out, w.take()...)
	}
	return out
}

// failed returns the first early end of a stream, or nil.
func (f fleet) failed() error {
	for _, w := range f {
		if err := w.failed(); err != nil {
			return err
		}
	}
	return nil
}

func (f fleet) close() {
	for _, w := range f {
		w.close()
	}
}

// nodeWatchers opens perNode Watch-by-index streams on each of nodes nodes,
// node k's on the informerd at addr(k), over a connection per node (as
// grpcWatchers groups them: perNode is under watchesPerConn), so that
// each topology's clients reach it the same way.
func nodeWatchers(ctx context.Context, addr func(node int) string, nodes, perNode int) (fleet, error) {
	var f fleet
	for k := range nodes {
		w, err := grpcWatchers(ctx, addr(k), nodes*perNode, nodes, func(i int) bool { return i%nodes == k }, 0, nil)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("watchers of %s: %w", nodeName(k, nodes), err)
		}
		f = append(f, w)
	}
	return f, nil
}

// leafConfig is the one configuration every leaf shares, as a DaemonSet's
// would: its part of the root's pods of ns is the node the leaf runs on,
// ${NODE_NAME}, which each leaf's environment sets.
func leafConfig(ns string) string {
	return fmt.Sprintf(`resources:
  - resource: pods
    indexes: [{name: node, jsonpath: "{.spec.nodeName}"}]
    upstreamSelector:
      namespace: %s
      index: {name: node, values: ["${NODE_NAME}"]}
`, ns)
}

// leaves are the leaf informerds of a tiers run, leaf k on node k.
type leaves []*daemon

// startLeaves starts a leaf over upstream for each of nodes nodes, with
// the configuration file cfgFile and NODE_NAME set to its node. One at a
// time: each picks free ports (testenv.FreeAddr) that it binds only when
// it runs, so leaves started at once can pick the same port, and the one
// that loses the bind exits while its /readyz is answered by the other.
func startLeaves(bin, cfgFile, upstream string, nodes int) (leaves, error) {
	var ls leaves
	for k := range nodes {
		l, err := startLeaf(bin, cfgFile, upstream, "NODE_NAME="+nodeName(k, nodes))
		if err != nil {
			ls.stop()
			return nil, fmt.Errorf("leaf of %s: %w", nodeName(k, nodes), err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func (ls leaves) pids() []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.pid
	}
	return out
}

// stop ends every leaf, at once.
func (ls leaves) stop() {
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(l.stop)
	}
	wg.Wait()
}

// writeLeafConfig writes leafConfig(ns) into dir and returns its path.
func writeLeafConfig(dir, ns string) (string, error) {
	path := filepath.Join(dir, "leaf.yaml")
	return path, os.WriteFile(path, []byte(leafConfig(ns)), 0o600)
}
