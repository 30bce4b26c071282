package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// ready checks that res's cache has synced; until then reads are refused
// with a 503 and Retry-After, which client-go retries.
func ready(w http.ResponseWriter, res pipeline.Served) bool {
	select {
	case <-res.Cache().HasSynced():
		return true
	default:
	}
	w.Header().Set("Retry-After", "1")
	writeStatus(w, unavailable(fmt.Sprintf("informerd's cache of %s has not completed its first list from the API server yet; retry shortly", res.Name())))
	return false
}

// get answers a get from the cache.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, res pipeline.Served, info *request.RequestInfo) {
	var opts metav1.GetOptions
	if err := metav1.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		writeStatus(w, badRequest(err.Error()))
		return
	}
	if err := h.reach(r.Context(), res, info.Namespace, opts.ResourceVersion); err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	o, ok := res.Cache().Get(object.KeyOf(info.Namespace, info.Name))
	if !ok {
		writeStatus(w, notFound(res.Resolved().GVR, info.Name))
		return
	}
	if t, ok := tableRequested(r); ok {
		h.writeTable(w, r, t, res, []*object.Object{o}, "", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(o.JSON)
}

func decodeToken(s string) (indexer.Continue, error) {
	t, err := indexer.ParseContinue(s)
	if err != nil {
		return t, apierrors.NewBadRequest("continue key is not valid: it was not issued by informerd (pass the continue value of the previous page unchanged)")
	}
	return t, nil
}

// list answers a list from one snapshot of the cache.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, res pipeline.Served, info *request.RequestInfo) {
	opts, err := listOptions(r.URL.Query(), false)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	ix := res.Cache()
	sel, err := newSelector(opts, info.Namespace, ix.IndexNames(), res.IndexFields())
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	v, current, err := h.snapshot(r.Context(), res, info.Namespace, opts)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	limit := math.MaxInt // no limit: every object, as the API server sends
	if opts.Limit > 0 {
		// Clamped, not refused: a page may be shorter than asked, and the
		// continue token brings the rest.
		limit = min(int(opts.Limit), h.opts.MaxPageSize)
	}
	after := ""
	if opts.Continue != "" {
		tok, _ := decodeToken(opts.Continue) // checked by snapshot
		after = tok.LastKey
	}
	match := sel.sel.Matches
	var objs []*object.Object
	var more bool
	rv := v.ResourceVersion
	switch {
	case sel.name != "" && after == "":
		// One object by name: a get that answers as a list.
		if o, ok := v.Get(object.KeyOf(info.Namespace, sel.name)); ok && match(o) {
			objs = []*object.Object{o}
		}
	case current && after == "" && sel.sel.Index >= 0:
		// An indexed field's equality is served through the index; its
		// continue pages scan the snapshot from the last key, filtering.
		snap, err := ix.ByIndex(ix.IndexNames()[sel.sel.Index], sel.sel.Values, match)
		if err != nil {
			writeStatus(w, asStatus(err))
			return
		}
		objs, rv = snap.Objects, snap.ResourceVersion
		if len(objs) > limit {
			objs, more = objs[:limit], true
		}
	default:
		objs, more = v.Page(after, namespacePrefix(info.Namespace), limit, match)
		if more && after == "" {
			ix.Keep(v) // for the continue pages
		}
	}
	token := ""
	if more {
		token = indexer.Continue{RV: rv, LastKey: objs[len(objs)-1].Key}.Encode()
	}
	if t, ok := tableRequested(r); ok {
		h.writeTable(w, r, t, res, objs, rv, token)
		return
	}
	writeList(w, res, objs, rv, token)
}

// snapshot returns the view a list reads, by the API server's
// resourceVersion semantics: a continue token's snapshot; "" the cache once
// it has reached the API server's current resourceVersion (a consistent
// read); "0" the cache as it is; otherwise not older than the given
// resourceVersion, or exactly it (resourceVersionMatch=Exact, or a limit
// with no match given), within the history window.
//
// current is true when the view is the cache's current state, which its
// indexes describe.
func (h *Handler) snapshot(ctx context.Context, res pipeline.Served, namespace string, opts *metainternalversion.ListOptions) (v indexer.View, current bool, err error) {
	if opts.Continue != "" {
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return v, false, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		tok, err := decodeToken(opts.Continue)
		if err != nil {
			return v, false, err
		}
		v, err = h.viewAt(ctx, res, namespace, tok.RV, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		return v, false, err
	}
	rv, match := opts.ResourceVersion, opts.ResourceVersionMatch
	exact := match == metav1.ResourceVersionMatchExact || (match == "" && opts.Limit > 0 && rv != "" && rv != "0")
	if exact {
		v, err = h.viewAt(ctx, res, namespace, rv, "")
		return v, false, err
	}
	if err := h.reach(ctx, res, namespace, rv); err != nil {
		return v, false, err
	}
	return res.Cache().View(), true, nil
}

// viewAt is the cache as it was at rv, waiting (as for NotOlderThan) when
// rv is ahead of it; tooOld, if set, replaces the 410's message.
func (h *Handler) viewAt(ctx context.Context, res pipeline.Served, namespace, rv, tooOld string) (indexer.View, error) {
	if err := h.reach(ctx, res, namespace, rv); err != nil {
		return indexer.View{}, err
	}
	v, err := res.Cache().ViewAt(rv)
	if errors.Is(err, indexer.ErrTooOld) {
		if tooOld == "" {
			tooOld = fmt.Sprintf("too old resource version: %s (%d)", rv, res.Cache().Stats().HistoryFloor)
		}
		return indexer.View{}, apierrors.NewResourceExpired(tooOld)
	}
	return v, err
}

// reach waits until the cache is at or past rv: for "" (a consistent read
// in namespace), the API server's current resourceVersion; for "0", at
// once.
func (h *Handler) reach(ctx context.Context, res pipeline.Served, namespace, rv string) error {
	switch rv {
	case "0":
		return nil
	case "":
		return h.consistent(ctx, res, namespace)
	}
	if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: want the decimal resourceVersion of an object or list", rv))
	}
	wctx, cancel := context.WithTimeout(ctx, h.opts.ConsistentWait)
	defer cancel()
	if err := res.Cache().WaitFor(wctx, rv); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %s", rv, res.Cache().Stats().ResourceVersion), 1)
	}
	return nil
}

func namespacePrefix(ns string) string {
	if ns == "" {
		return ""
	}
	return ns + "/"
}

// writeList writes objs in a List envelope, each object's cached JSON as it
// is: nothing is decoded or encoded per object.
func writeList(w http.ResponseWriter, res pipeline.Served, objs []*object.Object, rv, token string) {
	gvr := res.Resolved().GVR
	meta, _ := json.Marshal(metav1.ListMeta{ResourceVersion: rv, Continue: token})
	w.Header().Set("Content-Type", "application/json")
	b := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(b, `{"kind":%q,"apiVersion":%q,"metadata":%s,"items":[`, res.Resolved().Kind+"List", gvr.GroupVersion().String(), meta)
	for i, o := range objs {
		if i > 0 {
			_ = b.WriteByte(',')
		}
		_, _ = b.Write(o.JSON)
	}
	_, _ = b.WriteString("]}\n")
	_ = b.Flush()
}

// asStatus maps an error to the API server's Status.
func asStatus(err error) *metav1.Status {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return statusOf(se)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return timeout(err.Error())
	}
	if errors.Is(err, indexer.ErrBadResourceVersion) {
		return badRequest(err.Error())
	}
	return statusOf(apierrors.NewInternalError(err))
}
