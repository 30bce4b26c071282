package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/buger/jsonparser"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/pipeline"
)

// Consistent reads (a list or get with resourceVersion "", a watch with
// initial events from ""), as in KEP-2340: informerd asks the API server
// for its current resourceVersion (a list with limit=1, with informerd's
// own credentials), then answers from the cache once the cache has reached
// it, or proves that nothing the cache lacks happened in between (see
// prober). A cache restored from --state-dir answers none until the API
// server has confirmed it.
//
// A read the cache cannot serve so within ConsistentWait is forwarded to
// the API server with the caller's credentials (FallbackForward, the
// default), or gets the API server's own answer when its watch cache is not
// fresh in time: 429 TooManyRequests with Retry-After: 1 (since 1.37 it no
// longer falls back to etcd), which clients retry. So does a read when the
// API server cannot be asked: a consistent read is fresh or an error,
// never stale.

// Outcomes of a consistent read, the outcome label of
// informerd_kube_api_consistent_reads_total.
const (
	// OutcomeCurrent: the cache had reached the API server's
	// resourceVersion, at once or after waiting for its watch.
	OutcomeCurrent = "current"
	// OutcomeProven: a probe (see prober) showed the cache current.
	OutcomeProven = "proven"
	// OutcomeBehind: 429, the cache did not reach it in time (or was a
	// restored one the API server had not confirmed).
	OutcomeBehind = "behind"
	// OutcomeUnavailable: 429, the API server's resourceVersion could not
	// be read.
	OutcomeUnavailable = "unavailable"
)

// consistent waits until res's cache is consistent with the API server, as
// above, for a read in namespace ("" for all).
func (h *Handler) consistent(ctx context.Context, res pipeline.Served, namespace string) error {
	wctx, cancel := context.WithTimeout(ctx, h.opts.ConsistentWait)
	defer cancel()
	target, err := h.upstream.current(wctx, res.Resolved().GVR, namespace)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.opts.Observer.ConsistentRead(res.Name(), OutcomeUnavailable)
		return tooManyRequests(fmt.Sprintf("informerd cannot read the API server's current resourceVersion for a consistent read of %s: %v", res.Name(), err))
	}
	outcome, err := h.await(ctx, wctx, res, namespace, target)
	if err != nil {
		return err
	}
	h.opts.Observer.ConsistentRead(res.Name(), outcome)
	if outcome == OutcomeBehind {
		err := tooManyRequests(fmt.Sprintf("Too large resource version: %s, current: %s", target, res.Cache().Stats().ResourceVersion))
		if h.opts.ConsistentFallback == FallbackForward {
			return &behindError{err: err.(*apierrors.StatusError)}
		}
		return err
	}
	return nil
}

// Fallbacks of a consistent read the cache cannot serve in time
// (Options.ConsistentFallback, --consistent-read-fallback).
const (
	// FallbackForward forwards it to the API server with the caller's
	// credentials; a caller without a bearer token gets the 429.
	FallbackForward = "forward"
	// FallbackRefuse answers 429 with Retry-After: 1.
	FallbackRefuse = "refuse"
)

// behindError is a consistent read the cache could not serve in time,
// forwarded (FallbackForward): the API server answers it from its watch
// cache, or from etcd for a resource it keeps none of (events, by
// default), whose watches carry no bookmarks that could prove informerd's
// cache current. A caller informerd cannot forward for gets the 429.
type behindError struct{ err *apierrors.StatusError }

func (e *behindError) Error() string { return e.err.Error() }

func (e *behindError) status() *metav1.Status { return statusOf(e.err) }

// await waits, until wctx ends, for res's cache to reach target and be
// confirmed by the API server, asking the prober for a proof when it is
// behind. It returns the outcome, or ctx's error when the caller left.
func (h *Handler) await(ctx, wctx context.Context, res pipeline.Served, namespace, target string) (string, error) {
	n, err := strconv.ParseUint(target, 10, 64)
	if err != nil {
		return OutcomeUnavailable, nil
	}
	outcome := OutcomeCurrent
	if cacheRV(res) < n {
		outcome = OutcomeProven
		h.prober.need(res, watchScope(res, namespace), n)
	}
	for {
		if err := res.Cache().WaitFor(wctx, target); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return OutcomeBehind, nil
		}
		if !res.Restored() {
			return outcome, nil
		}
		// At the target but not confirmed yet: the resumed watch's first
		// answer confirms it, soon.
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return OutcomeBehind, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// watchScope is the namespace res's cache watches, given that it covers
// namespace: all ("") when it covers every namespace, else that one.
func watchScope(res pipeline.Served, namespace string) string {
	if res.Covers("") {
		return ""
	}
	return namespace
}

// tooManyRequests is the API server's 429 for a consistent read its watch
// cache could not serve in time, with Retry-After: 1.
func tooManyRequests(msg string) error { return apierrors.NewTooManyRequests(msg, 1) }

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
