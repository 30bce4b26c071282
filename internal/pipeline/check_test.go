package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/testenv"
)

// dropOnce passes the API server's responses through, except that in
// watch streams it drops the first event holding find: an event lost on
// the way, which nothing in the stream shows.
type dropOnce struct {
	next http.RoundTripper
	find []byte
	done *atomic.Bool
}

func (d *dropOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	resp.Body = &droppingBody{d: d, src: resp.Body, lines: bufio.NewReader(resp.Body)}
	return resp, nil
}

type droppingBody struct {
	d     *dropOnce
	src   io.ReadCloser
	lines *bufio.Reader
	rest  []byte
}

func (b *droppingBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		line, err := b.lines.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		if bytes.Contains(line, b.d.find) && b.d.done.CompareAndSwap(false, true) {
			continue
		}
		b.rest = line
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *droppingBody) Close() error { return b.src.Close() }

// TestIntegrityCheckRepairsALostEvent loses one watch event on the way
// from the real API server: the cache keeps the object's old state, and
// nothing in the stream shows it. The integrity check, a paged list at the
// cache's own resourceVersion, must find exactly that object, and the
// relist it starts must bring exactly that change to the watchers; the
// next check finds the cache equal to the API server.
func TestIntegrityCheckRepairsALostEvent(t *testing.T) {
	ignore := append(leakOptions, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(env.Config)
	const ns = "checked"
	createNamespace(t, client, ns)
	cmAPI := client.Resource(cmGVR).Namespace(ns)
	for _, name := range []string{"a", "b", "victim", "y", "z"} {
		if _, err := cmAPI.Create(ctx, configMap(ns, name, map[string]any{"v": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var dropped atomic.Bool
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return &dropOnce{next: rt, find: []byte(`"lost":"on-the-way"`), done: &dropped}
	}
	c, err := config.Parse([]byte("resources: [{resource: configmaps, namespace: checked}]"))
	if err != nil {
		t.Fatal(err)
	}
	cms := checkedConfigMaps(t, c, cfg, client, ns)

	if r := checkUntilCompared(t, cms); r.Result != pipeline.CheckMatch || r.Objects != 5 || r.Listed != 5 || r.CacheHash != r.ServerHash {
		t.Fatalf("check of a faithful cache = %+v, want a match of 5 objects", r)
	}

	// Lose the victim's update, then let the cache move past it.
	victim, err := cmAPI.Get(ctx, "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victim.SetLabels(map[string]string{"lost": "on-the-way"})
	victim, err = cmAPI.Update(ctx, victim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := cmAPI.Create(ctx, configMap(ns, "after", map[string]any{"v": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to hold checked/after", func() bool {
		o, ok := cms.Cache().Get("checked/after")
		return ok && o.ResourceVersion == after.GetResourceVersion()
	})
	if !dropped.Load() {
		t.Fatal("no watch event was dropped: the test proves nothing")
	}
	if o, _ := cms.Cache().Get("checked/victim"); o.ResourceVersion == victim.GetResourceVersion() {
		t.Fatal("the cache has the victim's update: the lost event was not lost")
	}

	rec := &recorder{}
	defer cms.Cache().AddListener(rec)()
	r := cms.CheckConsistency(ctx)
	if r.Result != pipeline.CheckMismatch || r.Differences != 1 || len(r.Diff) != 1 || !strings.HasPrefix(r.Diff[0], "checked/victim at resourceVersion ") {
		t.Fatalf("check after a lost event = %+v, want a mismatch naming checked/victim alone", r)
	}
	if r.CacheHash == r.ServerHash {
		t.Errorf("the hashes of differing lists are equal: %016x", r.CacheHash)
	}
	if got := cms.Consistency(); !got.Inconsistent || got.Counts[pipeline.CheckMismatch] != 1 {
		t.Errorf("Consistency after the mismatch = %+v, want inconsistent and one mismatch", got)
	}

	assertMirror(t, client, cms, cmGVR, ns)
	if diff := cmp.Diff([]string{"MODIFIED checked/victim"}, rec.events()); diff != "" {
		t.Errorf("events the relist brought watchers (-want +got):\n%s", diff)
	}
	if r := checkUntilCompared(t, cms); r.Result != pipeline.CheckMatch || r.Objects != 6 {
		t.Fatalf("check after the relist = %+v, want a match of 6 objects", r)
	}
	if got := cms.Consistency(); got.Inconsistent || got.Counts[pipeline.CheckMatch] != 2 || got.LastMismatch.Differences != 1 {
		t.Errorf("Consistency after the repair = %+v, want consistent, two matches, the mismatch kept", got)
	}
}

// checkUntilCompared checks p until a check compares (one skipped while a
// relist is due is tried again).
// checkedConfigMaps runs c's configmaps pipeline against cfg with integrity
// checks in pages of two (so that a walk crosses page boundaries), waits
// until it mirrors namespace ns as client reads it, and returns it.
func checkedConfigMaps(t *testing.T, c *config.Config, cfg *rest.Config, client dynamic.Interface, ns string) *pipeline.Pipeline {
	t.Helper()
	set, err := pipeline.NewSet(c, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)),
		pipeline.WithConsistencyChecks(pipeline.CheckOptions{PageSize: 2}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, set)
	waitSynced(t, set, "configmaps")
	cms := mustPipeline(t, set, "configmaps").(*pipeline.Pipeline)
	assertMirror(t, client, cms, cmGVR, ns)
	return cms
}

func checkUntilCompared(t *testing.T, p *pipeline.Pipeline) pipeline.CheckResult {
	t.Helper()
	var r pipeline.CheckResult
	testenv.Poll(30*time.Second, func() bool {
		r = p.CheckConsistency(context.Background())
		return r.Result != pipeline.CheckSkipped
	})
	return r
}
