package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/labels"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/shard"
)

// maxWait bounds a min_resource_version wait when the call has no deadline.
const maxWait = 30 * time.Second

// List implements CacheService: pages of one consistent snapshot. Over
// gRPC, the service NewGRPC registers sends list's encoded page as it is;
// this method, for callers in process, decodes it.
func (s *Server) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	m, err := s.list(ctx, req)
	return decoded(m, err, &pb.ListResponse{})
}

func (s *Server) list(ctx context.Context, req *pb.ListRequest) (*encoded, error) {
	p, err := s.resource(req.GetResource())
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, selectionAttributes("list", p, req.GetSelector())); err != nil {
		return nil, err
	}
	sel, err := selection(p.Cache(), req.GetSelector())
	if err != nil {
		return nil, err
	}
	m, err := s.mask(ctx, p, req.GetFields())
	if err != nil {
		return nil, err
	}
	match, index := sel.Matches, req.GetSelector().GetIndex()
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, invalid("limit %d: must be 0 (server default, %d) or positive", limit, s.opts.DefaultPageSize)
	case limit == 0:
		limit = s.opts.DefaultPageSize
	case limit > s.opts.MaxPageSize:
		// Clamped, not refused: a page may always be shorter than asked,
		// and the continue token brings the rest.
		limit = s.opts.MaxPageSize
		s.opts.Observer.LimitHit("max-page-size")
	}
	ix := p.Cache()
	if mrv := req.GetMinResourceVersion(); mrv != "" {
		if err := s.waitFor(ctx, ix, mrv); err != nil {
			return nil, err
		}
	}

	// A page of a whole-cache or namespace List is read from an immutable
	// view in O(page · log n); an index's few objects are listed whole (its
	// continue pages scan the view from the last key, filtering).
	var objs []*object.Object
	var rv string
	var more bool
	if tok := req.GetContinueToken(); tok != "" {
		ct, err := decodeToken(tok)
		if err != nil {
			return nil, err
		}
		// A token from a replica further along (a client failing over)
		// names a snapshot this cache has not reached: never answered
		// from an older one.
		if err := reachSnapshot(ctx, ix, ct.RV); err != nil {
			return nil, err
		}
		v, err := ix.ViewAt(ct.RV)
		if errors.Is(err, indexer.ErrTooOld) {
			return nil, withInfo(codes.OutOfRange, pb.ErrorReason_CONTINUE_TOKEN_EXPIRED,
				"continue token expired: its snapshot is older than the history window; list again from the start", nil)
		}
		if err != nil {
			return nil, toStatus(err)
		}
		objs, more = v.Page(ct.LastKey, namespacePrefix(sel.Namespace), limit, match)
		rv = v.ResourceVersion
	} else if index != nil {
		// The index lookup narrows; match re-checks namespace and labels.
		snap, err := ix.ByIndex(index.GetName(), index.GetValues(), match)
		if err != nil {
			return nil, toStatus(err)
		}
		objs, rv = snap.Objects, snap.ResourceVersion
		if len(objs) > limit {
			objs, more = objs[:limit], true
		}
	} else {
		v := ix.View()
		objs, more = v.Page("", namespacePrefix(sel.Namespace), limit, match)
		rv = v.ResourceVersion
		if more {
			ix.Keep(v) // for the continue pages
		}
	}
	if m != nil {
		// Projected before the page is cut to size, so that a mask's small
		// objects fill a page; the view's slice is the cache's, so the
		// page gets its own.
		page := make([]*object.Object, len(objs))
		for i, o := range objs {
			var err error
			if page[i], err = projected(m, o); err != nil {
				return nil, toStatus(err)
			}
		}
		objs = page
	}
	bytes := 0
	for i, o := range objs {
		if bytes += o.Len(); bytes > s.opts.MaxPageBytes && i > 0 {
			objs, more = objs[:i], true
			break
		}
	}
	var token string
	if more {
		token = indexer.Continue{RV: rv, LastKey: objs[len(objs)-1].Key}.Encode()
	}
	page, err := listPage(objs, rv, token)
	return page, toStatus(err)
}

// continueWait bounds the wait of a continue page for its snapshot.
const continueWait = 5 * time.Second

// reachSnapshot waits, at most continueWait, until the cache has reached
// rv, a continue token's snapshot; else UNAVAILABLE /
// RESOURCE_VERSION_AHEAD, as a Watch ahead of the cache.
func reachSnapshot(ctx context.Context, ix *indexer.Indexer, rv string) error {
	wctx, cancel := context.WithTimeout(ctx, continueWait)
	defer cancel()
	err := ix.WaitFor(wctx, rv)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, indexer.ErrBadResourceVersion):
		return invalid("continue_token is not one this server issued; pass the token of the previous ListResponse unchanged")
	case ctx.Err() != nil:
		return toStatus(ctx.Err())
	}
	return withInfo(codes.Unavailable, pb.ErrorReason_RESOURCE_VERSION_AHEAD,
		fmt.Sprintf("the continue token's snapshot, resourceVersion %s, is ahead of this replica's cache (at %s), which did not reach it in %s; retry, on this replica or the one that issued the token", rv, ix.Stats().ResourceVersion, continueWait), nil)
}

// namespacePrefix is the key prefix of a namespace's objects ("" for all).
func namespacePrefix(ns string) string {
	if ns == "" {
		return ""
	}
	return ns + "/"
}

func decodeToken(s string) (indexer.Continue, error) {
	t, err := indexer.ParseContinue(s)
	if err != nil {
		return t, invalid("continue_token is not one this server issued; pass the token of the previous ListResponse unchanged")
	}
	return t, nil
}

// selection validates a Selector and turns it into the fan-out's form, with
// Index -1 when no index is selected.
func selection(ix *indexer.Indexer, sel *pb.Selector) (fanout.Selection, error) {
	ls, err := labels.Parse(sel.GetLabelSelector())
	if err != nil {
		return fanout.Selection{}, invalid("label_selector %q: %v", sel.GetLabelSelector(), err)
	}
	out := fanout.Selection{Namespace: sel.GetNamespace(), Labels: ls, Index: -1}
	sh, err := shard.Parse(sel.GetShardSelector())
	if err != nil {
		return fanout.Selection{}, invalid("shard_selector %q: %v", sel.GetShardSelector(), err)
	}
	if sh != nil {
		out.Fields = sh.Matches
	}
	if index := sel.GetIndex(); index != nil {
		names := ix.IndexNames()
		out.Index = slices.Index(names, index.GetName())
		if out.Index < 0 {
			return fanout.Selection{}, invalid("index %q does not exist; indexes of this resource: %v", index.GetName(), names)
		}
		if len(index.GetValues()) == 0 {
			return fanout.Selection{}, invalid("index %q: give at least one value", index.GetName())
		}
		out.Values = index.GetValues()
	}
	return out, nil
}
