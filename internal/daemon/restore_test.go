package daemon_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerd/informerd/internal/testenv"
)

// TestStateFromARestoredEtcd: etcd is restored from a backup after
// informerd saved its state, and the cluster writes past the state's
// resourceVersion in its new history. The cluster uid is the same, so the
// state is accepted and the API server confirms it (the resumed watch is
// accepted: nothing is listed). The first integrity check after that finds
// the difference, and the relist it causes makes the cache equal the API
// server again.
func TestStateFromARestoredEtcd(t *testing.T) {
	ctx := context.Background()
	s := newStateEnv(t, "etcd-restore", 6)
	s.opts.ConsistencyCheck.Interval = 3 * time.Second
	backup := filepath.Join(t.TempDir(), "etcd-backup")
	if err := env.KillAPIServer(func() error { return env.BackupEtcd(backup) }); err != nil {
		t.Fatal(err)
	}

	// The history the backup loses: informerd's state is saved in it.
	d1, c1, _, stop1 := s.run()
	testenv.Eventually(t, time.Minute, "the first informerd to list", func() bool {
		got, _, err := s.list(c1)
		return err == nil && len(got) == 6
	})
	cms := s.kube.CoreV1().ConfigMaps(s.ns)
	const lost = 30
	for i := range lost {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("lost", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.Delete(ctx, "cm0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "informerd to see the writes the backup loses", func() bool {
		got, _, err := s.list(c1)
		return err == nil && cmp.Equal(got, s.apiServer())
	})
	_, savedRV, _ := s.list(c1)
	if c := readyz(t, d1).Resources[0].Consistency; c != nil && c.Checks["mismatch"] > 0 {
		t.Errorf("a check before the restore found a mismatch: %+v", c)
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}

	// The restore, and a new history that moves past the saved resourceVersion.
	if err := env.KillAPIServer(func() error { return env.RestoreEtcd(backup) }); err != nil {
		t.Fatal(err)
	}
	saved, _ := strconv.ParseInt(savedRV, 10, 64)
	for i := 0; ; i++ {
		cm, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1"}, Data: map[string]string{"n": fmt.Sprint(i)}}, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64); rv > saved {
			break
		}
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restore"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	truth := s.apiServer()
	s.upstream.lists()

	d2, c2, _, _ := s.run()
	testenv.Eventually(t, 30*time.Second, "the API server to confirm the restored cache", func() bool {
		return !restored(t, c2) && readyz(t, d2).Resources[0].Phase == "Synced"
	})
	if r := readyz(t, d2).Resources[0]; r.Upstream == nil || r.Upstream.Relists != 0 {
		t.Fatalf("the resumed watch was refused (the check would find nothing to find): %+v", r.Upstream)
	}
	var first *healthCheck
	testenv.Eventually(t, time.Minute, "the first integrity check after the confirmation", func() bool {
		c := readyz(t, d2).Resources[0].Consistency
		if c == nil || c.Checks["match"]+c.Checks["mismatch"] == 0 {
			return false
		}
		first = &healthCheck{c.Checks, c.Last.Result, c.Last.Differences, c.Last.First}
		return true
	})
	t.Logf("the first check after the confirmation: %+v", *first)
	if first.result != "mismatch" || first.counts["match"] != 0 || first.differences < lost {
		t.Errorf("the first check after the confirmation: %+v, want a mismatch of at least %d objects", *first, lost)
	}
	if !strings.Contains(strings.Join(first.first, " "), s.ns+"/") {
		t.Errorf("the check names %v, want keys of namespace %s", first.first, s.ns)
	}
	if !strings.Contains(s.log.String(), "mismatch") {
		t.Errorf("the mismatch is not in the log:\n%s", s.log.String())
	}
	testenv.Eventually(t, 30*time.Second, "the relist to make the cache equal the API server", func() bool {
		got, _, _ := s.list(c2)
		return cmp.Equal(got, truth)
	})
	testenv.Eventually(t, 30*time.Second, "a later check to match", func() bool {
		c := readyz(t, d2).Resources[0].Consistency
		return c != nil && c.Checks["match"] > 0 && !c.Inconsistent
	})
	if r := readyz(t, d2).Resources[0]; r.Upstream == nil || r.Upstream.Relists != 1 {
		t.Errorf("/readyz after the repair: %+v, want exactly 1 relist", r.Upstream)
	}
}

// healthCheck is what TestStateFromARestoredEtcd keeps of a check.
type healthCheck struct {
	counts      map[string]int64
	result      string
	differences int
	first       []string
}
