package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// ready checks that res's cache has synced. Until then reads are refused
// as kube-apiserver refuses them while its watch cache initializes
// (KEP-4568: 429 "storage is (re)initializing" with Retry-After), which
// client-go's REST client retries after the delay, and its Reflector
// retries a watch on without listing again.
//
// A read first waits up to initializingWait for the cache: a restart under
// thousands of informers (a state restoring) is then over before most of
// them would have been told to come back.
func ready(w http.ResponseWriter, r *http.Request, res pipeline.Served) bool {
	synced := res.Cache().HasSynced()
	select {
	case <-synced:
		return true // every read of a synced cache: no timer
	default:
	}
	t := time.NewTimer(initializingWait)
	defer t.Stop()
	select {
	case <-synced:
		return true
	case <-t.C:
	case <-r.Context().Done():
	}
	initializing(w, fmt.Sprintf("storage is (re)initializing: informerd's cache of %s has not completed its first list from the API server", res.Name()))
	return false
}

// initializingWait bounds how long a read waits for a cache that is not
// ready, before the 429 that sends it back for later.
const initializingWait = 5 * time.Second

// initializing writes the 429 of a cache that is not ready yet.
func initializing(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeStatus(w, tooMany(msg))
}

// get answers a get from the cache.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, f *facts) {
	res, ns, name := f.res, f.namespace, f.info.Name
	var opts metav1.GetOptions
	// The API server's codec for a get's parameters (GetResource): it
	// knows GetOptions' conversion from url.Values, metav1's does not.
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		writeStatus(w, badRequest(err.Error()))
		return
	}
	if err := h.reach(r.Context(), res, ns, opts.ResourceVersion); err != nil {
		h.fail(w, r, err)
		return
	}
	o, ok := res.Cache().Get(object.KeyOf(ns, name))
	if !ok {
		writeStatus(w, notFound(res.Resolved().GVR, name))
		return
	}
	if f.out.as == asTable {
		h.writeTable(w, r, f.out.table, res, []*object.Object{o}, metav1.ListMeta{ResourceVersion: o.ResourceVersion})
		return
	}
	if f.out.media == mediaProtobuf {
		h.writeProtoObject(w, f.out, res, o)
		return
	}
	data, err := h.objectJSON(f.out, o)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
	_, _ = w.Write([]byte{'\n'}) // as the API server's encoder ends it
}

func decodeToken(s string) (indexer.Continue, error) {
	t, err := indexer.ParseContinue(s)
	if err != nil {
		return t, apierrors.NewBadRequest("continue key is not valid: it was not issued by informerd (pass the continue value of the previous page unchanged)")
	}
	return t, nil
}

// list answers a list from one snapshot of the cache.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, f *facts) {
	res, ns := f.res, f.namespace
	opts, err := listOptions(r.URL.Query(), false)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	ix := res.Cache()
	sel, err := newSelector(opts, ns, h.fieldsFor(r.Context(), res), ix.IndexNames(), res.IndexFields())
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	v, current, err := h.snapshot(r.Context(), res, ns, opts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit := math.MaxInt // no limit: every object, as the API server sends
	if opts.Limit > 0 && opts.ResourceVersion != "0" {
		// Clamped, not refused: a page may be shorter than asked, and the
		// continue token brings the rest. With resourceVersion=0 the API
		// server's cache ignores the limit (computeListLimit): so does
		// informerd's.
		limit = min(int(opts.Limit), h.opts.MaxPageSize)
	}
	after, issued := "", time.Now().Unix()
	if opts.Continue != "" {
		tok, _ := decodeToken(opts.Continue) // checked by snapshot
		after = tok.LastKey
		if tok.RV != latestRV {
			issued = tok.Issued // the pages of one snapshot expire together
		}
	}
	match := sel.sel.Matches
	var objs []*object.Object
	var more bool
	rv := v.ResourceVersion
	prefix := namespacePrefix(ns)
	switch {
	case sel.name != "" && after == "" && (ns != "" || !res.Resolved().Namespaced):
		// One object by name: a get that answers as a list. Across all
		// namespaces a name may be in each: that list scans.
		if o, ok := v.Get(object.KeyOf(ns, sel.name)); ok && match(o) {
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
		objs, more = v.Page(after, prefix, limit, match)
		if !more && limit > 0 && len(objs) == limit {
			// The API server's cache stops at the limit-th match and
			// continues when any object follows, matching or not.
			more = v.HasAfter(objs[len(objs)-1].Key, prefix)
		}
		if more && after == "" {
			ix.Keep(v) // for the continue pages
		}
	}
	meta := metav1.ListMeta{ResourceVersion: rv, ShardInfo: shardInfo(sel.shard)}
	if more {
		meta.Continue = indexer.Continue{RV: rv, LastKey: objs[len(objs)-1].Key, Issued: issued}.Encode()
		if sel.everything() {
			// As the API server's cache: the objects after this page,
			// only when no selector makes the count a guess.
			n := int64(v.Count(objs[len(objs)-1].Key, prefix))
			meta.RemainingItemCount = &n
		}
	}
	if f.out.as == asTable {
		meta.ShardInfo = nil // the API server's Table conversion does not carry it
		h.writeTable(w, r, f.out.table, res, objs, meta)
		return
	}
	if f.out.media == mediaProtobuf {
		h.writeProtoList(w, f.out, res, objs, meta)
		return
	}
	h.writeList(w, f.out, res, objs, meta)
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
		if tok.RV == latestRV {
			// An inconsistent continue token: the rest of the list, read
			// consistently now.
			if err := h.reach(ctx, res, namespace, ""); err != nil {
				return v, false, err
			}
			return res.Cache().View(), false, nil
		}
		if tok.Issued != 0 && time.Since(time.Unix(tok.Issued, 0)) > h.opts.ContinueLifetime {
			// The API server's etcd has compacted the first page's
			// resourceVersion by now, though this cache may still hold it.
			return v, false, inconsistentContinue(tok.LastKey)
		}
		v, err = h.viewAt(ctx, res, namespace, tok.RV)
		if past := (*pastError)(nil); errors.As(err, &past) {
			return v, false, inconsistentContinue(tok.LastKey)
		}
		return v, false, err
	}
	rv, match := opts.ResourceVersion, opts.ResourceVersionMatch
	exact := match == metav1.ResourceVersionMatchExact || (match == "" && opts.Limit > 0 && rv != "" && rv != "0")
	if exact {
		v, err = h.viewAt(ctx, res, namespace, rv)
		return v, false, err
	}
	if err := h.reach(ctx, res, namespace, rv); err != nil {
		return v, false, err
	}
	return res.Cache().View(), true, nil
}

// viewAt is the cache as it was at rv, waiting (as for NotOlderThan) when
// rv is ahead of it; a pastError when rv is older than its history.
func (h *Handler) viewAt(ctx context.Context, res pipeline.Served, namespace, rv string) (indexer.View, error) {
	if err := h.reach(ctx, res, namespace, rv); err != nil {
		return indexer.View{}, err
	}
	v, err := res.Cache().ViewAt(rv)
	if errors.Is(err, indexer.ErrTooOld) {
		return indexer.View{}, &pastError{}
	}
	return v, err
}

// reach waits until the cache is at or past rv: for "" (a consistent read
// in namespace), the API server's current resourceVersion; for "0", at
// once; for N (not older than N), until N, asking the prober for a proof
// when the cache is behind. A cache that does not reach N within
// ConsistentWait has not seen what the API server has (N may come from a
// write to another resource, or from another replica): errAhead, and the
// read goes to the API server.
func (h *Handler) reach(ctx context.Context, res pipeline.Served, namespace, rv string) error {
	switch rv {
	case "0":
		return nil
	case "":
		return h.consistent(ctx, res, namespace)
	}
	n, err := storage.APIObjectVersioner{}.ParseResourceVersion(rv)
	if err != nil {
		// The API server's own words for a list (it answers a get or a
		// watch 500, docs/api.md).
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if cacheRV(res) >= n {
		return nil
	}
	h.prober.need(res, watchScope(res, namespace), n)
	wctx, cancel := context.WithTimeout(ctx, h.opts.ConsistentWait)
	defer cancel()
	if err := res.Cache().WaitFor(wctx, rv); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &aheadError{rv: rv, current: res.Cache().Stats().ResourceVersion}
	}
	return nil
}

// aheadError: a resourceVersion this cache has not reached in time. The
// read is forwarded to the API server, which answers from its own watch
// cache; a caller informerd cannot forward for (no bearer token) gets the
// API server's 504 for a resourceVersion beyond its cache, with the
// ResourceVersionTooLarge cause clients look for.
type aheadError struct{ rv, current string }

func (e *aheadError) Error() string {
	return fmt.Sprintf("Too large resource version: %s, current: %s", e.rv, e.current)
}

func (e *aheadError) status() *metav1.Status {
	st := timeout(e.Error())
	st.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return st
}

// pastError: an exact resourceVersion older than this cache's history,
// which the API server answers from etcd until etcd compacts it. The read
// is forwarded; a caller informerd cannot forward for gets the API
// server's 410 for a compacted one.
type pastError struct{}

func (e *pastError) Error() string { return "The resourceVersion for the provided list is too old." }

func (e *pastError) status() *metav1.Status { return expired(e.Error()) }

// forwardable is a read the cache cannot answer and the API server can:
// aheadError, pastError.
type forwardable interface {
	error
	status() *metav1.Status
}

// fail answers a read that cannot be answered from the cache: err's Status,
// or, for a forwardable one, the API server's own answer to the same
// request, with the caller's credentials.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil {
		timedOut(w)
		return
	}
	var fw forwardable
	if !errors.As(err, &fw) {
		writeStatus(w, asStatus(err))
		return
	}
	if r.Header.Get("Authorization") == "" {
		writeStatus(w, fw.status())
		return
	}
	for k, v := range factsOf(r).impersonation {
		r.Header[k] = v
	}
	h.forward.ServeHTTP(w, r)
}

func namespacePrefix(ns string) string {
	if ns == "" {
		return ""
	}
	return ns + "/"
}

// latestRV is the resourceVersion of an inconsistent continue token: the
// list continues from the cache as it is now (the API server's -1).
const latestRV = "-1"

// inconsistentContinue is the API server's 410 for a continue token whose
// snapshot is gone, with a token that continues the list after lastKey at
// the latest resourceVersion (etcd3's handleCompactedErrorForPaging).
func inconsistentContinue(lastKey string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. " +
		"Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	err.ErrStatus.ListMeta.Continue = indexer.Continue{RV: latestRV, LastKey: lastKey}.Encode()
	return err
}

// writeList writes objs in a List envelope, each object's cached JSON as it
// is (for a built-in type without its kind and apiVersion, as the API
// server encodes a typed list's items): nothing is decoded or encoded per
// object. A PartialObjectMetadataList's items are each object's
// PartialObjectMetadata, with their kind and apiVersion.
func (h *Handler) writeList(w http.ResponseWriter, out *output, res pipeline.Served, objs []*object.Object, lm metav1.ListMeta) {
	gvr := res.Resolved().GVR
	kind, apiVersion := res.Resolved().Kind+"List", gvr.GroupVersion().String()
	typed := builtin(res.Resolved())
	if out.as == asMetadataList {
		kind, apiVersion, typed = "PartialObjectMetadataList", out.metaGV.String(), false
	}
	meta, _ := json.Marshal(lm)
	w.Header().Set("Content-Type", "application/json")
	cw := &countingWriter{w: w}
	b := bufio.NewWriterSize(cw, 64<<10)
	fmt.Fprintf(b, `{"kind":%q,"apiVersion":%q,"metadata":%s,"items":[`, kind, apiVersion, meta)
	var scratch []byte // a cold object's JSON, decompressed once
	for i, o := range objs {
		if i > 0 {
			_ = b.WriteByte(',')
		}
		var data []byte
		var err error
		if o.Cold() && out.form() == 0 {
			data, err = o.AppendBytes(scratch[:0])
			scratch = data
		} else {
			data, err = h.objectJSON(out, o)
		}
		if err != nil {
			// A damaged object is never served. While nothing has
			// reached the client the answer is an error; after, the
			// response is cut short, which no client reads as a list.
			if cw.n == 0 {
				b.Reset(w)
				writeStatus(w, asStatus(err))
				return
			}
			_ = b.Flush()
			panic(http.ErrAbortHandler)
		}
		if typed {
			writeWithoutTypeMeta(b, data)
			continue
		}
		_, _ = b.Write(data)
	}
	_, _ = b.WriteString("]}\n")
	_ = b.Flush()
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// objectJSON returns o as out asks for it: its cached JSON, or
// PartialObjectMetadata cut from it, either without managedFields when
// asked (KEP-5958). Each form of an object version is encoded once while
// it is recent (forms). It fails only on a cold object whose stored bytes
// are damaged (object.ErrDamaged).
func (h *Handler) objectJSON(out *output, o *object.Object) ([]byte, error) {
	data, err := o.Bytes()
	if err != nil {
		return nil, err
	}
	f := out.form()
	if f == 0 {
		return data, nil
	}
	b, err := h.forms.get(o, f, func(*object.Object) ([]byte, error) { return encodeForm(data, f) })
	if err != nil {
		return data, nil // the cache holds only objects with metadata
	}
	return b, nil
}

// readable checks, before a response starts, that every cold object of
// objs decompresses: a damaged one is never written (object.ErrDamaged),
// and the response is an error instead of a list cut short. The JSON is
// decompressed onto one buffer, reused: only the check is kept.
func readable(objs []*object.Object) error {
	var scratch []byte
	for _, o := range objs {
		if o.Cold() {
			var err error
			if scratch, err = o.AppendBytes(scratch[:0]); err != nil {
				return err
			}
		}
	}
	return nil
}

// cachedJSON is the JSON of o, an object that readable passed.
func cachedJSON(o *object.Object) []byte {
	b, _ := o.Bytes()
	return b
}

// asStatus maps an error to the API server's Status.
func asStatus(err error) *metav1.Status {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return statusOf(se)
	}
	var st apierrors.APIStatus // negotiation's errors
	if errors.As(err, &st) {
		s := st.Status()
		return &s
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return timeout(err.Error())
	}
	if errors.Is(err, indexer.ErrBadResourceVersion) {
		return badRequest(err.Error())
	}
	if errors.Is(err, object.ErrDamaged) {
		return statusOf(apierrors.NewServiceUnavailable(err.Error() + "; the cache is listing again to repair it, retry shortly"))
	}
	return statusOf(apierrors.NewInternalError(err))
}
