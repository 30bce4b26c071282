package chaos_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/testenv"
)

// parts are the values of the writer's "part" label, each a leaf's part.
var parts = []string{"a", "b"}

// partOf is the part of the writer's object cm-i.
func partOf(i int) string { return parts[i%len(parts)] }

// rootConfig is the replicas' configuration: the namespace's configmaps,
// indexed by part, which is how the leaves take theirs.
func rootConfig(ns string) string {
	return "resources:\n  - resource: configmaps\n    namespace: " + ns + "\n    indexes:\n      - {name: part, label: part}\n"
}

// leafConfig takes one part of the replicas' configmaps.
func leafConfig(ns, part string) string {
	return "resources:\n  - resource: configmaps\n    upstreamSelector: {namespace: " + ns + ", index: {name: part, values: [" + part + "]}}\n"
}

// startLeaves starts one leaf informerd per part, each with
// --upstream-informerd listing every replica (it connects to one at random
// and fails over to another), and returns a client of each.
func (s *suite) startLeaves(bin, dir, kubeconfig string) []pb.CacheServiceClient {
	s.t.Helper()
	var out []pb.CacheServiceClient
	for _, part := range parts {
		d, c := s.startLeaf(bin, dir, kubeconfig, "leaf-"+part, part)
		s.leaves = append(s.leaves, d)
		out = append(out, c)
	}
	s.leafClients = out
	return out
}

// startLeaf starts a leaf informerd named name taking part, over every
// replica, stopped when the test ends, and returns it and a client of it.
func (s *suite) startLeaf(bin, dir, kubeconfig, name, part string) (*testenv.Daemon, pb.CacheServiceClient) {
	s.t.Helper()
	roots := make([]string, len(s.replicas))
	for i, r := range s.replicas {
		roots[i] = r.GRPCAddr
	}
	config := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(config, []byte(leafConfig(s.ns, part)), 0o600); err != nil {
		s.t.Fatal(err)
	}
	d, err := testenv.StartDaemon(bin, config, kubeconfig, "--upstream-informerd="+strings.Join(roots, ","),
		"--watch-rate=100000", "--watch-burst=100000", "--max-watches-per-identity=100000",
		"--list-rate=100000", "--list-burst=100000", "--keepalive-time=2s", "--keepalive-timeout=2s")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(d.Stop)
	conn, err := dial(d.GRPCAddr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return d, pb.NewCacheServiceClient(conn)
}

// killEachRoot kills every replica with SIGKILL in turn, restarting it
// before the next is killed. Whichever replica a leaf is connected to,
// it loses it at least once while the other one serves: a leaf on the
// first replica fails over to the second and, when the second is killed,
// back to the restarted first; a leaf on the second fails over once.
func killEachRoot(s *suite) error {
	for i, r := range s.replicas {
		r.Kill()
		s.logf("replica %d killed with SIGKILL", i)
		time.Sleep(2 * time.Second) // the leaves fail over; writes go on
		if err := r.Restart(); err != nil {
			return fmt.Errorf("restart replica %d: %w", i, err)
		}
		time.Sleep(2 * time.Second) // the leaves catch up before the next kill
	}
	return nil
}

// expectTierFailover checks that the leaves resumed their watches on the
// other replica: no relist (a leaf lists again only on OUT_OF_RANGE), and
// their clients saw nothing of it: no stream ended, none listed again.
func expectTierFailover(s *suite, d movement) error {
	if err := atLeast("the leaves' informerd_upstream_watch_starts_total", d.leafWatchStarts, float64(len(s.leaves))); err != nil {
		return err
	}
	if d.leafRelists != 0 {
		return fmt.Errorf("the leaves' informerd_upstream_relists_total moved by %g over the failover (now %g), want 0: a leaf resumes from its resourceVersion on the other replica",
			d.leafRelists, d.leafRelistsAfter)
	}
	if d.leafClientResumes != 0 {
		return fmt.Errorf("%d streams of the leaves' clients ended, want 0: a leaf keeps serving while it fails over", d.leafClientResumes)
	}
	if d.leafClientRelists != 0 {
		return fmt.Errorf("%d of the leaves' clients got OUT_OF_RANGE and listed again, want 0", d.leafClientRelists)
	}
	return nil
}
