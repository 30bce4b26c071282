package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/informerd/informerd/internal/pipeline"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// corruptOnce passes the API server's responses through, except that in
// watch streams it rewrites the first event holding find with replace: a
// malformed object the API server sent once.
type corruptOnce struct {
	next          http.RoundTripper
	find, replace []byte
	done          *atomic.Bool // shared by the wrappers of every transport
}

func (c *corruptOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	resp.Body = &corruptingBody{c: c, src: resp.Body, lines: bufio.NewReader(resp.Body)}
	return resp, nil
}

// corruptingBody is a watch stream read a line (an event) at a time.
type corruptingBody struct {
	c     *corruptOnce
	src   io.ReadCloser
	lines *bufio.Reader
	rest  []byte
}

func (b *corruptingBody) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		line, err := b.lines.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		if bytes.Contains(line, b.c.find) && b.c.done.CompareAndSwap(false, true) {
			line = bytes.Replace(line, b.c.find, b.c.replace, 1)
		}
		b.rest = line
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *corruptingBody) Close() error { return b.src.Close() }

// TestMissedChangeIsRecovered makes the API server's watch deliver one
// object informerd cannot encode (a label whose value is a number). The
// change must not be lost: the watch ends, the relist brings the object as
// the API server holds it, and the failure is counted.
func TestMissedChangeIsRecovered(t *testing.T) {
	ignore := append(leakOptions, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(env.Config)
	const ns = "missed"
	createNamespace(t, client, ns)
	cmAPI := client.Resource(cmGVR).Namespace(ns)
	if _, err := cmAPI.Create(ctx, configMap(ns, "before", map[string]any{"v": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var corrupted atomic.Bool
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return &corruptOnce{next: rt, find: []byte(`"corrupt":"once"`), replace: []byte(`"corrupt":1`), done: &corrupted}
	}
	set := start(t, "resources: [{resource: configmaps, namespace: missed}]", cfg)
	waitSynced(t, set, "configmaps")
	cms := mustPipeline(t, set, "configmaps")
	relistsBefore := cms.(*pipeline.Pipeline).Report().Upstream.Relists.Load()
	rec := &recorder{}
	defer cms.Cache().AddListener(rec)()

	victim := configMap(ns, "victim", map[string]any{"v": "1"})
	victim.SetLabels(map[string]string{"corrupt": "once"})
	if _, err := cmAPI.Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	assertMirror(t, client, cms, cmGVR, ns)
	if !corrupted.Load() {
		t.Fatal("no watch event was corrupted: the test proves nothing")
	}
	if diff := cmp.Diff([]string{"ADDED missed/victim"}, rec.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(rec.flag) > 0 && !rec.flag[0] {
		t.Error("the object came from the watch, not from the relist")
	}
	sig := cms.(*pipeline.Pipeline).Report().Upstream
	if got := sig.EncodeErrors.Load(); got != 1 {
		t.Errorf("EncodeErrors = %d, want 1", got)
	}
	if got := sig.Relists.Load(); got <= relistsBefore {
		t.Errorf("relists = %d, want more than %d", got, relistsBefore)
	}
}
