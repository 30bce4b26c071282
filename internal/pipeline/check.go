package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
)

// Results of an integrity check, the result label of
// informerd_cache_consistency_checks_total.
const (
	// CheckMatch: the API server's list at the cache's resourceVersion
	// holds exactly the cache's objects at their resourceVersions.
	CheckMatch = "match"
	// CheckMismatch: it does not; the resource is listed again.
	CheckMismatch = "mismatch"
	// CheckSkipped: no check was possible: the resourceVersion was
	// compacted, or the cache was not in a state to compare (not synced,
	// a restored cache not yet confirmed, a relist due).
	CheckSkipped = "skipped"
	// CheckError: the list failed.
	CheckError = "error"
)

// CheckResults are the results in the order metrics report them.
var CheckResults = []string{CheckMatch, CheckMismatch, CheckSkipped, CheckError}

// CheckOptions configure the integrity checks of a Set's resources
// (--consistency-check-*).
type CheckOptions struct {
	// Interval is the mean time between two checks of a resource, with
	// 10% jitter; 0 turns the checks off.
	Interval time.Duration
	// PageSize is the limit of each page of the API server's list.
	PageSize int64
	// PagePause is the pause between two pages, so that a check of a
	// large resource spreads its cost.
	PagePause time.Duration
}

// Defaults of CheckOptions, used by informerd's flags.
const (
	DefaultCheckInterval  = 5 * time.Minute
	DefaultCheckPageSize  = 500
	DefaultCheckPagePause = 50 * time.Millisecond
)

// afterTrouble is the longest wait for a check after a mismatch or after a
// restored cache was confirmed: the moments the cache is most likely to be
// wrong.
const afterTrouble = 30 * time.Second

// maxDiffKeys bounds the differing keys a check keeps and logs.
const maxDiffKeys = 10

// KeyVersion is one object of a list as an integrity check compares it:
// its cache key ("namespace/name", or "name") and resourceVersion.
type KeyVersion struct {
	Key, ResourceVersion string
}

// ExactLister is a Source that lists what it held at an exact
// resourceVersion: the integrity checks compare that with the cache. The
// API server is one (resourceVersionMatch=Exact); an upstream informerd is
// not, and its leaves are not checked.
type ExactLister interface {
	// ListExact lists res's objects selected as r selects them at rv, in
	// pages of at most limit, pausing pause between pages, and calls page
	// with each page's objects in the order of the list (by key). An
	// error that apierrors.IsResourceExpired or IsGone recognizes means rv
	// was compacted.
	ListExact(ctx context.Context, res Resolved, r Selection, rv string, limit int64, pause time.Duration, page func([]KeyVersion) error) error
}

// Selection is what of a resource's configuration selects the objects its
// cache holds: the namespace and the selectors.
type Selection struct {
	Namespace, LabelSelector, FieldSelector string
}

// CheckResult is one integrity check.
type CheckResult struct {
	// Result is CheckMatch, CheckMismatch, CheckSkipped or CheckError.
	Result string
	// At is when the check ended; Took how long it ran.
	At   time.Time
	Took time.Duration
	// ResourceVersion is the cache's, at which both sides were compared.
	ResourceVersion string
	// Objects is how many objects the cache held at ResourceVersion;
	// Listed how many the API server listed.
	Objects, Listed int
	// CacheHash and ServerHash are FNV-64a hashes of every object's key
	// and resourceVersion, in key order, on each side.
	CacheHash, ServerHash uint64
	// Differences counts the keys that differ; Diff names the first few.
	Differences int
	Diff        []string
	// Reason says why a check was skipped or failed.
	Reason string
}

// Consistency is a resource's integrity checks so far.
type Consistency struct {
	// Counts holds how many checks ended with each result (CheckResults).
	Counts map[string]int64
	// Last is the last check that compared or failed; zero before one.
	Last CheckResult
	// Inconsistent is set by a mismatch and cleared by the next match;
	// LastMismatch is the last check that found a difference.
	Inconsistent bool
	LastMismatch CheckResult
}

// checks records a pipeline's check results.
type checks struct {
	mu           sync.Mutex
	counts       map[string]int64
	last         CheckResult
	mismatch     CheckResult
	inconsistent bool
}

func (c *checks) record(r CheckResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int64{}
	}
	c.counts[r.Result]++
	if r.Result != CheckSkipped || c.last.Result == "" {
		c.last = r
	}
	switch r.Result {
	case CheckMismatch:
		c.inconsistent, c.mismatch = true, r
	case CheckMatch:
		c.inconsistent = false
	}
}

func (c *checks) snapshot() Consistency {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Consistency{Counts: make(map[string]int64, len(CheckResults)), Last: c.last, Inconsistent: c.inconsistent, LastMismatch: c.mismatch}
	for _, r := range CheckResults {
		out.Counts[r] = c.counts[r]
	}
	out.Last.Diff = slices.Clone(c.last.Diff)
	out.LastMismatch.Diff = slices.Clone(c.mismatch.Diff)
	return out
}

// Consistency returns the resource's integrity checks so far.
func (p *Pipeline) Consistency() Consistency { return p.checks.snapshot() }

// CheckConsistency compares the cache with the API server's list at the
// cache's resourceVersion: every key and resourceVersion, read in the
// list's order. On a mismatch it logs the first differing keys and makes
// the reflector list again, diffed against the cache as any relist is, so
// that watchers see exactly the objects that differ. The result is
// recorded for the metrics and /readyz.
func (p *Pipeline) CheckConsistency(ctx context.Context) CheckResult {
	start := time.Now()
	r := p.checkConsistency(ctx)
	r.At = time.Now()
	r.Took = r.At.Sub(start)
	if ctx.Err() != nil && r.Result == CheckError {
		return r // stopping: not a failure of the check
	}
	p.checks.record(r)
	attrs := []any{"result", r.Result, "resourceVersion", r.ResourceVersion, "objects", r.Objects, "took", r.Took.Round(time.Millisecond)}
	switch r.Result {
	case CheckMismatch:
		p.log.Error("integrity check: the cache differs from the API server at the same resourceVersion; listing again",
			append(attrs, "listed", r.Listed, "differences", r.Differences, "first", strings.Join(r.Diff, "; "),
				"cacheHash", fmt.Sprintf("%016x", r.CacheHash), "serverHash", fmt.Sprintf("%016x", r.ServerHash))...)
		p.mu.Lock()
		refl := p.refl
		p.mu.Unlock()
		if refl != nil {
			refl.Relist(fmt.Errorf("integrity check at resourceVersion %s: %d objects differ from the API server's (first: %s)",
				r.ResourceVersion, r.Differences, strings.Join(r.Diff, "; ")))
		}
	case CheckMatch:
		p.log.Debug("integrity check", attrs...)
	default:
		p.log.Info("integrity check", append(attrs, "reason", r.Reason)...)
	}
	return r
}

func (p *Pipeline) checkConsistency(ctx context.Context) CheckResult {
	lister, ok := p.source().(ExactLister)
	if !ok {
		return CheckResult{Result: CheckSkipped, Reason: "the source cannot list at an exact resourceVersion"}
	}
	p.mu.Lock()
	refl, res := p.refl, p.resolved
	p.mu.Unlock()
	switch {
	case refl == nil || res.GVR.Resource == "":
		return CheckResult{Result: CheckSkipped, Reason: "not running"}
	case !p.index.Stats().Synced:
		return CheckResult{Result: CheckSkipped, Reason: "not synced"}
	case p.Restored():
		return CheckResult{Result: CheckSkipped, Reason: "the restored cache is not confirmed yet"}
	case refl.Relisting():
		return CheckResult{Result: CheckSkipped, Reason: "a relist is due"}
	}
	view := p.index.View()
	sel := Selection{LabelSelector: p.cfg.LabelSelector, FieldSelector: p.cfg.FieldSelector}
	if res.Namespaced {
		sel.Namespace = p.cfg.Namespace
	}
	cmp := newComparison(view)
	err := lister.ListExact(ctx, res, sel, view.ResourceVersion, p.checkOpts.PageSize, p.checkOpts.PagePause, cmp.page)
	r := CheckResult{ResourceVersion: view.ResourceVersion, Objects: view.Len()}
	switch {
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		r.Result, r.Reason = CheckSkipped, "the resourceVersion was compacted: "+err.Error()
		return r
	case err != nil:
		r.Result, r.Reason = CheckError, err.Error()
		return r
	}
	cmp.finish()
	r.Listed, r.CacheHash, r.ServerHash = cmp.listed, cmp.cacheHash.Sum64(), cmp.serverHash.Sum64()
	r.Differences, r.Diff = cmp.differences, cmp.diff
	r.Result = CheckMatch
	if r.Differences > 0 {
		r.Result = CheckMismatch
	}
	return r
}

// checkLoop checks the cache every interval, with jitter, until ctx ends;
// sooner after a mismatch, and soon after a restored cache is confirmed:
// a state saved from an etcd since restored from a backup shows then.
func (p *Pipeline) checkLoop(ctx context.Context) {
	interval := p.checkOpts.Interval
	if _, ok := p.source().(ExactLister); !ok || interval <= 0 {
		return
	}
	select {
	case <-p.index.HasSynced():
	case <-ctx.Done():
		return
	}
	next := wait.Jitter(interval, 0.1)
	if !p.restoredAt().IsZero() {
		if wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return !p.Restored(), nil }) != nil {
			return
		}
		next = wait.Jitter(min(interval, afterTrouble), 0.1)
	}
	t := time.NewTimer(next)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next = wait.Jitter(interval, 0.1)
		if p.CheckConsistency(ctx).Result == CheckMismatch {
			next = wait.Jitter(min(interval, afterTrouble), 0.1)
		}
		t.Reset(next)
	}
}

// comparison walks the cache's view in key order beside the pages of the
// API server's list, which come in the same order (the API server lists
// by key, and the cache's keys are the suffixes of its storage keys).
type comparison struct {
	view indexer.View
	// buf holds the cache's objects not yet compared, read a batch at a
	// time; after is the key of the last object read into it.
	buf   []*object.Object
	after string
	done  bool // the view has no object after buf

	last                  string // the API server's last key
	listed                int
	cacheHash, serverHash hash.Hash64
	scratch               []byte
	differences           int
	diff                  []string
}

const comparisonBatch = 1024

func newComparison(v indexer.View) *comparison {
	return &comparison{view: v, cacheHash: fnv.New64a(), serverHash: fnv.New64a()}
}

// peek returns the cache's next object in key order, reading a batch when
// the buffer is empty.
func (c *comparison) peek() (*object.Object, bool) {
	if len(c.buf) == 0 && !c.done {
		c.buf, _ = c.view.Page(c.after, "", comparisonBatch, nil)
		if len(c.buf) < comparisonBatch {
			c.done = true
		}
		if len(c.buf) > 0 {
			c.after = c.buf[len(c.buf)-1].Key
		}
	}
	if len(c.buf) == 0 {
		return nil, false
	}
	return c.buf[0], true
}

// take consumes the object peek returned.
func (c *comparison) take() {
	o := c.buf[0]
	c.buf = c.buf[1:]
	c.hashKV(c.cacheHash, o.Key, o.ResourceVersion)
}

// hashKV adds "key\x00rv\n" to h, through c's scratch buffer.
func (c *comparison) hashKV(h hash.Hash64, key, rv string) {
	c.scratch = append(append(append(append(c.scratch[:0], key...), 0), rv...), '\n')
	_, _ = h.Write(c.scratch)
}

func (c *comparison) differ(format string, args ...any) {
	c.differences++
	if len(c.diff) < maxDiffKeys {
		c.diff = append(c.diff, fmt.Sprintf(format, args...))
	}
}

// errUnordered: the list was not in key order, so the walk cannot compare.
var errUnordered = errors.New("the API server's list is not in key order")

// page compares one page of the API server's list.
func (c *comparison) page(items []KeyVersion) error {
	for _, it := range items {
		if c.listed > 0 && it.Key <= c.last {
			return fmt.Errorf("%w: %q after %q", errUnordered, it.Key, c.last)
		}
		c.last = it.Key
		c.listed++
		c.hashKV(c.serverHash, it.Key, it.ResourceVersion)
		for {
			o, ok := c.peek()
			if !ok || o.Key >= it.Key {
				break
			}
			c.differ("%s@%s only in the cache", o.Key, o.ResourceVersion)
			c.take()
		}
		o, ok := c.peek()
		if !ok || o.Key != it.Key {
			c.differ("%s@%s missing from the cache", it.Key, it.ResourceVersion)
			continue
		}
		if o.ResourceVersion != it.ResourceVersion {
			c.differ("%s at resourceVersion %s in the cache, %s at the API server", it.Key, o.ResourceVersion, it.ResourceVersion)
		}
		c.take()
	}
	return nil
}

// finish counts the cache's objects after the list's last.
func (c *comparison) finish() {
	for {
		o, ok := c.peek()
		if !ok {
			return
		}
		c.differ("%s@%s only in the cache", o.Key, o.ResourceVersion)
		c.take()
	}
}
