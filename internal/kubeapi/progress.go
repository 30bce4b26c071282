package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// A quiet resource's cache moves only with its own events and the API
// server's bookmarks (about one a minute), while the API server's
// resourceVersion moves with every write to any resource: its cache is
// behind a consistent read's resourceVersion most of the time, with
// nothing missing. The API server's own watch cache proves itself current
// by asking etcd for progress; informerd has no such request, so it proves
// it the same way from outside:
//
//  1. a consistent list with limit=1 (upstreamRV) makes the API server's
//     watch cache of the resource current, at or past the read's target;
//  2. a watch from the cache's resourceVersion S, with bookmarks and
//     timeoutSeconds=3, replays every change after S from that watch
//     cache, in order, then gets the bookmark the API server sends 2 s
//     before a watch's deadline, at its watch cache's resourceVersion B;
//  3. the changes before that bookmark are all the changes in (S, B]. Once
//     the cache has applied the last of them (at once when there are none),
//     it holds the state at B: informerd queues a bookmark at B
//     (Served.Progress), which moves the cache, its history and its
//     watchers to B as one from the API server would.
//
// A probe costs the API server one short watch served from its watch
// cache, and a reader about 1-2 s. One runs at a time per cache, for every
// reader waiting on it.
type prober struct {
	log      *slog.Logger
	api      *apiServer
	upstream *upstreamRV

	mu    sync.Mutex
	state map[pipeline.Served]*probeState
}

type probeState struct {
	// want is the highest resourceVersion a reader waits for; asked counts
	// the requests, so a probe knows whether one came while it ran;
	// running is set while a goroutine probes.
	want    uint64
	asked   uint64
	running bool
}

// probeTimeout is the probe watch's timeoutSeconds: the API server sends
// its bookmark 2 s before the deadline, so 3 s is the shortest that gets
// one.
const probeTimeout = 3

func newProber(log *slog.Logger, api *apiServer, upstream *upstreamRV) *prober {
	return &prober{log: log, api: api, upstream: upstream, state: map[pipeline.Served]*probeState{}}
}

// need asks that res's cache be proven current up to rv; it returns at
// once. namespace is the scope the cache watches ("" for all).
func (p *prober) need(res pipeline.Served, namespace string, rv uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state[res] // one per cached resource: bounded by the configuration
	if st == nil {
		st = &probeState{}
		p.state[res] = st
	}
	st.want = max(st.want, rv)
	st.asked++
	if !st.running {
		st.running = true
		go p.run(res, namespace, st)
	}
}

// run probes until the cache has reached every resourceVersion wanted
// that the API server has reached: a probe proves the cache up to the API
// server's resourceVersion at its start, so a reader that wants more (one
// ahead of the API server) waits for its deadline without another probe,
// unless a reader asked while the probe ran. It stops at the first failure:
// the readers waiting then time out, and the next one tries again.
func (p *prober) run(res pipeline.Served, namespace string, st *probeState) {
	for {
		p.mu.Lock()
		want, asked := st.want, st.asked
		if cacheRV(res) >= want {
			st.running, st.want = false, 0
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), (probeTimeout+5)*time.Second)
		err := p.probe(ctx, res, namespace, want)
		cancel()
		if err != nil {
			p.log.Debug("probe of a cache's progress failed; its waiting consistent reads will be refused", "resource", res.Name(), "err", err)
		}
		p.mu.Lock()
		if err != nil || st.asked == asked {
			st.running, st.want = false, 0
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

func cacheRV(res pipeline.Served) uint64 {
	n, _ := object.ParseRV(res.Cache().Stats().ResourceVersion)
	return n
}

// probe makes one proof, as above, for a target of want.
func (p *prober) probe(ctx context.Context, res pipeline.Served, namespace string, want uint64) error {
	gvr := res.Resolved().GVR
	now, err := p.upstream.current(ctx, gvr, namespace)
	if err != nil {
		return err
	}
	n, ok := object.ParseRV(now)
	if !ok {
		return fmt.Errorf("probe of %s: the API server's resourceVersion %q", gvr, now)
	}
	// The API server has not reached a resourceVersion ahead of it; the
	// probe proves what it has.
	want = min(want, n)
	if cacheRV(res) >= want {
		return nil
	}
	from := res.Cache().Stats().ResourceVersion
	base := path.Join("/api", gvr.Version)
	if gvr.Group != "" {
		base = path.Join("/apis", gvr.Group, gvr.Version)
	}
	p0 := path.Join(base, gvr.Resource)
	if namespace != "" {
		p0 = path.Join(base, "namespaces", namespace, gvr.Resource)
	}
	q := fmt.Sprintf("watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s", probeTimeout, from)
	resp, err := p.api.get(ctx, p0, q, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe watch of %s: HTTP %d", gvr, resp.StatusCode)
	}
	var last uint64 // the last change before the bookmark
	dec := json.NewDecoder(io.LimitReader(resp.Body, 64<<20))
	for {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("probe watch of %s ended without a bookmark: %w", gvr, err)
		}
		rv, err := strconv.ParseUint(ev.Object.Metadata.ResourceVersion, 10, 64)
		switch {
		case ev.Type == "ERROR":
			return fmt.Errorf("probe watch of %s: the API server ended it", gvr)
		case err != nil:
			return fmt.Errorf("probe watch of %s: resourceVersion %q", gvr, ev.Object.Metadata.ResourceVersion)
		case ev.Type != "BOOKMARK":
			last = max(last, rv)
			continue
		}
		if rv < want {
			return fmt.Errorf("probe watch of %s: bookmark at %d, short of %d", gvr, rv, want)
		}
		if last > 0 {
			// The changes it replayed reach the cache through its own
			// watch; the bookmark follows them.
			if err := res.Cache().WaitFor(ctx, strconv.FormatUint(last, 10)); err != nil {
				return err
			}
		}
		if !res.Progress(ev.Object.Metadata.ResourceVersion) {
			return fmt.Errorf("probe of %s: the cache cannot take a bookmark now", gvr)
		}
		return nil
	}
}
