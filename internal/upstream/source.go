// Package upstream takes a cache's objects from another informerd instead
// of the API server: a node-local informerd (a leaf) fed by a cluster tier
// (the root). A Source is a pipeline.Source: resources resolve through the
// upstream's ListResources, and each is listed and watched through
// pkg/client's ListWatch, with its streaming lists, resume from a
// resourceVersion and bookmarks. Everything after the reflector is the
// leaf's own: history, indexes, relist-as-diff, fan-out, metrics, health.
// Because the upstream passes the API server's resourceVersions on
// unchanged, a client can move between a leaf, another leaf and the root
// and resume exactly.
package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/pkg/client"
)

// Source is an upstream informerd as a pipeline.Source. Its methods may be
// called concurrently.
type Source struct {
	cache pb.CacheServiceClient
	addr  string // for messages

	mu        sync.Mutex
	resources []*pb.ResourceInfo // the upstream's, as last listed; nil: list again
}

var _ pipeline.Source = (*Source)(nil)

// New returns the Source that reads through conn, a connection to the
// upstream informerd at addr (named in messages).
func New(conn grpc.ClientConnInterface, addr string) *Source {
	return &Source{cache: pb.NewCacheServiceClient(conn), addr: addr}
}

// Resolve implements pipeline.Source: name is found among the upstream's
// served resources by its canonical name ("pods", "deployments.apps"), or
// as plural.version.group.
func (s *Source) Resolve(ctx context.Context, name string) (pipeline.Resolved, error) {
	rs, err := s.list(ctx)
	if err != nil {
		return pipeline.Resolved{}, err
	}
	for _, r := range rs {
		if r.GetName() == name || (r.GetGroup() != "" && name == plural(r)+"."+r.GetVersion()+"."+r.GetGroup()) {
			if r.GetKind() == "" || r.GetVersion() == "" {
				// The upstream has not resolved it yet (it has just
				// started): its scope and kind are unknown. The list is
				// read again at the next call, which may find it resolved.
				s.Reset()
				return pipeline.Resolved{}, fmt.Errorf("the upstream informerd at %s has not resolved %q yet; retrying", s.addr, name)
			}
			return pipeline.Resolved{
				GVR:        schema.GroupVersionResource{Group: r.GetGroup(), Version: r.GetVersion(), Resource: plural(r)},
				Kind:       r.GetKind(),
				Namespaced: r.GetNamespaced(),
			}, nil
		}
	}
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	return pipeline.Resolved{}, &pipeline.NotServedError{Msg: fmt.Sprintf(
		"the upstream informerd at %s does not serve %q (it serves %s); add it to the upstream's configuration; retrying", s.addr, name, strings.Join(names, ", "))}
}

// plural is the resource part of a canonical name.
func plural(r *pb.ResourceInfo) string {
	p, _, _ := strings.Cut(r.GetName(), ".")
	return p
}

// list returns the upstream's resources, listing them once until Reset.
func (s *Source) list(ctx context.Context) ([]*pb.ResourceInfo, error) {
	s.mu.Lock()
	rs := s.resources
	s.mu.Unlock()
	if rs != nil {
		return rs, nil
	}
	resp, err := s.cache.ListResources(ctx, &pb.ListResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("the upstream informerd at %s: %w", s.addr, client.FromError(err))
	}
	rs = resp.GetResources()
	if rs == nil {
		rs = []*pb.ResourceInfo{}
	}
	s.mu.Lock()
	s.resources = rs
	s.mu.Unlock()
	return rs, nil
}

// Reset implements pipeline.Source.
func (s *Source) Reset() {
	s.mu.Lock()
	s.resources = nil
	s.mu.Unlock()
}

// ListWatch implements pipeline.Source: the part of res that r's
// upstreamSelector (and namespace and label selector) selects.
func (s *Source) ListWatch(res pipeline.Resolved, r config.Resource, prepare func(*object.Raw)) (*cache.ListWatch, any) {
	// NoRetry: the leaf's reflector spaces the retries itself, with the
	// same policy, and sees each refusal (/readyz, metrics).
	o := client.Options{Resource: res.CanonicalName(), Decoder: rawDecoder{prepare: prepare}, NoRetry: true}
	o.Namespace, o.LabelSelector = r.Namespace, r.LabelSelector
	if u := r.UpstreamSelector; u != nil {
		if u.Namespace != "" {
			o.Namespace = u.Namespace
		}
		o.LabelSelector = joinSelectors(o.LabelSelector, u.LabelSelector)
		if u.Index != nil {
			o.Index, o.IndexValues = u.Index.Name, u.Index.Values
		}
	}
	lw, err := client.NewListWatch(s.cache, nil, o)
	if err != nil {
		// NewListWatch checks only what the configuration's validation
		// has checked; fail every call with it rather than panic.
		fail := func() error { return fmt.Errorf("upstream %s: %w", res.CanonicalName(), err) }
		return &cache.ListWatch{
			ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, fail() },
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, fail() },
		}, nil
	}
	return &cache.ListWatch{ListWithContextFunc: lw.ListWithContext, WatchFuncWithContext: lw.WatchWithContext}, lw
}

func joinSelectors(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// rawDecoder decodes the upstream's objects as the API server's are: into
// object.Raw, readied by the pipeline's prepare.
type rawDecoder struct{ prepare func(*object.Raw) }

func (rawDecoder) New() runtime.Object { return &object.Raw{} }

func (d rawDecoder) Decode(data []byte) (runtime.Object, error) {
	r, err := object.ParseRaw(data)
	if err != nil {
		return nil, err
	}
	if d.prepare != nil {
		d.prepare(r)
	}
	return r, nil
}

func (rawDecoder) List(items []runtime.Object, rv, cont string) (runtime.Object, error) {
	l := &object.RawList{Items: make([]object.Raw, 0, len(items))}
	for _, it := range items {
		r, ok := it.(*object.Raw)
		if !ok {
			return nil, fmt.Errorf("upstream: got a %T in a list, want *object.Raw", it)
		}
		l.Items = append(l.Items, *r)
	}
	l.ResourceVersion, l.Continue = rv, cont
	return l, nil
}

// Check reports what stops r from being taken from the upstream: a
// resource it does not serve, an index it does not have, a part the
// caller may not read. It lists one object of the part to find out.
func (s *Source) Check(ctx context.Context, r config.Resource) []string {
	res, err := s.Resolve(ctx, r.Resource)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	info := s.info(res.CanonicalName())
	sel := &pb.Selector{Namespace: r.Namespace, LabelSelector: r.LabelSelector}
	if u := r.UpstreamSelector; u != nil {
		if u.Namespace != "" {
			sel.Namespace = u.Namespace
		}
		sel.LabelSelector = joinSelectors(sel.LabelSelector, u.LabelSelector)
		if ix := u.Index; ix != nil {
			if !slices.Contains(info.GetIndexes(), ix.Name) {
				problems = append(problems, fmt.Sprintf("upstreamSelector.index %q: the upstream has no such index for %s (its indexes: %s); add it to the upstream's configuration", ix.Name, res.CanonicalName(), strings.Join(info.GetIndexes(), ", ")))
				return problems
			}
			sel.Index = &pb.IndexSelector{Name: ix.Name, Values: ix.Values}
		}
	}
	if _, err := s.cache.List(ctx, &pb.ListRequest{Resource: res.CanonicalName(), Selector: sel, Limit: 1}); err != nil {
		problems = append(problems, fmt.Sprintf("list through the upstream: %v", client.FromError(err)))
	}
	return problems
}

// info returns the upstream's ResourceInfo of a canonical name.
func (s *Source) info(name string) *pb.ResourceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.resources {
		if r.GetName() == name {
			return r
		}
	}
	return nil
}
