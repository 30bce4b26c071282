package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/buger/jsonparser"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/pipeline"
)

// Consistent reads (a list or get with resourceVersion "", a watch with
// initial events from ""), as in KEP-2340: informerd asks the API server
// for its current resourceVersion (a list with limit=1, with informerd's
// own credentials), then answers from the cache once the cache has reached
// it.
//
// A quiet resource's cache may stay behind the API server's
// resourceVersion, which moves with every write to any resource, until the
// next bookmark (about a minute). But the API server answers a consistent
// list only once its own watch cache has caught up, so every change to the
// resource it committed before answering is already on its way to
// informerd's watch. informerd therefore waits until its cache reaches the
// resourceVersion, or for a grace period of twice the list's round trip
// (at least 50ms, at most ConsistentWait), whichever comes first: what the
// API server had sent by then is in the cache.
const minGrace = 50 * time.Millisecond

// consistent waits until res's cache is consistent with the API server, as
// above. When the API server cannot be asked, the cache is served as it is:
// informerd keeps serving through an outage.
func (h *Handler) consistent(ctx context.Context, res pipeline.Served, namespace string) error {
	started := time.Now()
	rv, err := h.upstream.current(ctx, res.Resolved().GVR, namespace)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.opts.Log.Debug("consistent read served from the cache as it is: cannot ask the API server for its resourceVersion", "resource", res.Name(), "err", err)
		return nil
	}
	grace := min(max(2*time.Since(started), minGrace), h.opts.ConsistentWait)
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if err := res.Cache().WaitFor(wctx, rv); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// upstreamRV asks the API server for its current resourceVersion. Calls
// for one resource are coalesced: a call joins the next request that starts
// after it was made (never one already under way, which might answer with
// a resourceVersion older than a write the caller has seen), so at most
// one request per resource is in flight and one waits.
type upstreamRV struct {
	api *apiServer

	mu     sync.Mutex
	rounds map[scope]*rounds
}

// scope is what one list for the resourceVersion reads: a resource in a
// namespace ("" for all), where informerd may list it.
type scope struct {
	gvr       schema.GroupVersionResource
	namespace string
}

type rounds struct {
	inflight, next *round
}

type round struct {
	done chan struct{}
	rv   string
	err  error
	// waiters counts the readers waiting for it; guarded by
	// upstreamRV.mu.
	waiters int
}

func newUpstreamRV(api *apiServer) *upstreamRV {
	return &upstreamRV{api: api, rounds: map[scope]*rounds{}}
}

// current returns the API server's current resourceVersion, read by a list
// of gvr in namespace ("" for all) that starts after the call. It lists
// where the reader reads, which is where informerd caches and so may list
// (a sidecar's RBAC often covers one namespace only).
func (u *upstreamRV) current(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (string, error) {
	key := scope{gvr, namespace}
	u.mu.Lock()
	if len(u.rounds) >= maxScopes {
		u.forgetIdleLocked()
	}
	rs := u.rounds[key]
	if rs == nil {
		rs = &rounds{}
		u.rounds[key] = rs
	}
	r, lead := rs.next, false
	if r == nil {
		r, lead = &round{done: make(chan struct{})}, true
		rs.next = r
	}
	r.waiters++
	inflight := rs.inflight
	u.mu.Unlock()
	if lead {
		// Bounded: at most one waiting round per cached resource.
		go u.run(key, rs, r, inflight)
	}
	select {
	case <-r.done:
		return r.rv, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (u *upstreamRV) run(key scope, rs *rounds, r, inflight *round) {
	if inflight != nil {
		<-inflight.done
	}
	u.mu.Lock()
	rs.inflight, rs.next = r, nil
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.rv, r.err = u.fetch(ctx, key)
	close(r.done)
}

// maxScopes bounds the scopes remembered; namespaces come from requests.
const maxScopes = 4096

// forgetIdleLocked drops the scopes with no request waiting or in flight.
func (u *upstreamRV) forgetIdleLocked() {
	for k, rs := range u.rounds {
		if rs.next != nil {
			continue
		}
		if rs.inflight != nil {
			select {
			case <-rs.inflight.done:
			default:
				continue
			}
		}
		delete(u.rounds, k)
	}
}

// fetch lists one object's metadata of the scope's resource, for the
// list's resourceVersion.
func (u *upstreamRV) fetch(ctx context.Context, s scope) (string, error) {
	gvr := s.gvr
	base := path.Join("/api", gvr.Version)
	if gvr.Group != "" {
		base = path.Join("/apis", gvr.Group, gvr.Version)
	}
	p := path.Join(base, gvr.Resource)
	if s.namespace != "" {
		p = path.Join(base, "namespaces", s.namespace, gvr.Resource)
	}
	resp, err := u.api.get(ctx, p, "limit=1", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list %s with limit=1: HTTP %d", gvr, resp.StatusCode)
	}
	rv, err := jsonparser.GetString(body, "metadata", "resourceVersion")
	if err != nil || rv == "" {
		return "", fmt.Errorf("list %s with limit=1: no resourceVersion in the answer", gvr)
	}
	return rv, nil
}
