package kubeapi

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/informerd/informerd/internal/fanout"
)

// Watch timing, as the API server's defaults: a watch without
// timeoutSeconds ends after a random 30 to 60 minutes (--min-request-timeout
// 1800s), and a quiet watch that allows bookmarks gets one a minute.
const (
	minWatchTimeout = 30 * time.Minute
	idleBookmark    = time.Minute
)

// watch streams a watch's events as the API server's JSON watch events.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request, f *facts) {
	res, ns, info := f.res, f.namespace, f.info
	opts, err := listOptions(r.URL.Query(), true)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	if info.Name != "" {
		// A watch of one object: the API server turns the name into a
		// field selector.
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if n, ok := opts.FieldSelector.RequiresExactMatch(fieldName); !ok || n != info.Name {
				writeStatus(w, badRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
		}
		opts.FieldSelector = fields.OneTermEqualSelector(fieldName, info.Name)
	}
	sel, err := newSelector(opts, ns, h.fieldsFor(r.Context(), res), res.Cache().IndexNames(), res.IndexFields())
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	if n := h.watches.Add(1); n > int64(h.opts.MaxWatches) {
		h.watches.Add(-1)
		writeStatus(w, tooMany(fmt.Sprintf("too many watches: informerd's limit of %d open watches is reached; retry later or use another replica", h.opts.MaxWatches)))
		return
	}
	defer h.watches.Add(-1)
	select {
	case <-h.stopping:
		// As kube-apiserver answers requests while it shuts down
		// (--shutdown-send-retry-after): a 429 with Retry-After, which
		// client-go's Reflector retries as a watch, where a 503 would make
		// it list again.
		w.Header().Set("Retry-After", "5")
		writeStatus(w, statusOf(apierrors.NewTooManyRequests("informerd is shutting down, please try again later (or on another replica)", 5)))
		return
	default:
	}

	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if err := h.reach(r.Context(), res, ns, opts.ResourceVersion); err != nil {
		h.fail(w, r, err)
		return
	}
	wopts := fanout.WatchOptions{
		Selection:         sel.sel,
		SendInitialEvents: initial,
		AllowBookmarks:    opts.AllowWatchBookmarks,
	}
	if !initial && opts.ResourceVersion != "0" {
		wopts.ResourceVersion = opts.ResourceVersion
	}
	watcher, items, at, err := res.Hub().Watch(wopts)
	ew := newEventWriter(h, res, w, f.out)
	ew.gzip = f.gzip
	if f.out.as == asTable {
		ew.cols = h.columns.get(r.Context(), res.Resolved().GVR)
	}
	w.Header().Set("Content-Type", "application/json")
	if f.out.media == mediaProtobuf {
		w.Header().Set("Content-Type", contentTypeProtobufWatch)
	}
	w.WriteHeader(http.StatusOK)
	if err != nil {
		ew.end(err, opts.ResourceVersion)
		return
	}
	defer watcher.Close()
	h.opts.Observer.WatchStarted(res.Name())
	defer h.opts.Observer.WatchEnded(res.Name())

	timeout := minWatchTimeout + rand.N(minWatchTimeout)
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		// 0 is the default, as at the API server (ListResource).
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	idle := time.NewTimer(idleBookmark)
	defer idle.Stop()
	observe := h.opts.Observer.DeliveryObserver(res.Name())

	if !ew.write(items) {
		return
	}
	if initial && opts.AllowWatchBookmarks {
		if !ew.bookmark(at, true) {
			return
		}
	}
	if !ew.flush() {
		return
	}
	for {
		items, err := watcher.Poll()
		if err != nil {
			ew.end(err, watcher.SentResourceVersion())
			return
		}
		if len(items) == 0 {
			select {
			case <-watcher.Ready():
				continue
			case <-idle.C:
				idle.Reset(idleBookmark)
				it, ok := watcher.IdleBookmark()
				if !ok {
					continue
				}
				items = []fanout.Item{it}
			case <-deadline.C:
				return // a clean end: the client watches again from its last resourceVersion
			case <-h.stopping:
				return
			case <-r.Context().Done():
				return
			}
		}
		if !ew.write(items) || !ew.flush() {
			return
		}
		now := time.Now()
		for _, it := range items {
			if !it.Applied.IsZero() {
				observe(now.Sub(it.Applied))
			}
		}
		idle.Reset(idleBookmark)
	}
}
