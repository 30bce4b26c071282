package server_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/sharding"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/projection"
	"github.com/informerd/informerd/internal/server"
)

// canceled is the context every call runs with.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// checkStatus fails unless err is a status with one of codes.
func checkStatus(t *testing.T, call string, req proto.Message, err error, allowed ...codes.Code) codes.Code {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s(%v) returned %T %v, not a status: a client sees UNKNOWN", call, req, err, err)
	}
	if !slices.Contains(allowed, st.Code()) {
		t.Fatalf("%s(%v) = %v %q; want one of %v", call, req, st.Code(), st.Message(), allowed)
	}
	return st.Code()
}

func marshals(t *testing.T, call string, resp proto.Message) {
	t.Helper()
	if _, err := proto.Marshal(resp); err != nil {
		t.Fatalf("%s response does not marshal (the client gets INTERNAL): %v\n%v", call, err, resp)
	}
}

// requestProblem is the code the server must refuse the resource and
// selector of a request with, or OK when they are valid; with OK come the
// resource's model and the reference for the selector.
func (fx *fuzzFixture) requestProblem(resource string, sel *pb.Selector) (codes.Code, *model, refSelection) {
	m, ok := fx.models[resource]
	switch {
	case resource == "":
		return codes.InvalidArgument, nil, refSelection{}
	case !ok:
		return codes.NotFound, nil, refSelection{}
	case !m.synced:
		return codes.Unavailable, m, refSelection{}
	}
	ls, err := labels.Parse(sel.GetLabelSelector())
	if err != nil {
		return codes.InvalidArgument, m, refSelection{}
	}
	ref := refSelection{ns: sel.GetNamespace(), labels: ls}
	if expr := sel.GetShardSelector(); expr != "" {
		shard, err := sharding.Parse(expr)
		if err != nil {
			return codes.InvalidArgument, m, refSelection{}
		}
		if !shard.Empty() {
			ref.shard = shard
		}
	}
	if ix := sel.GetIndex(); ix != nil {
		if !slices.Contains(m.indexes, ix.GetName()) || len(ix.GetValues()) == 0 {
			return codes.InvalidArgument, m, refSelection{}
		}
		ref.index, ref.values = ix.GetName(), ix.GetValues()
	}
	return codes.OK, m, ref
}

// maskOf is a request's field mask, or the code it is refused with.
func maskOf(fields *fieldmaskpb.FieldMask) (*projection.Mask, codes.Code) {
	m, err := projection.Compile(fields.GetPaths())
	if err != nil {
		return nil, codes.InvalidArgument
	}
	return m, codes.OK
}

// shown is an object's JSON as mask shows it.
func shown(t *testing.T, mask *projection.Mask, json []byte) string {
	t.Helper()
	p, err := mask.Project(json)
	if err != nil {
		t.Fatalf("project %s: %v", json, err)
	}
	return string(p)
}

// viewOf finds the object version whose JSON, as mask shows it, is json.
func (fx *fuzzFixture) viewOf(t *testing.T, mask *projection.Mask, json string) (view, bool) {
	t.Helper()
	if mask == nil {
		v, ok := fx.views[json]
		return v, ok
	}
	for full, v := range fx.views {
		if shown(t, mask, []byte(full)) == json {
			return v, true
		}
	}
	return view{}, false
}

func (fx *fuzzFixture) checkGet(t *testing.T, req *pb.GetRequest) {
	resp, err := fx.srv.Get(canceled(), req)
	if err != nil {
		checkStatus(t, "Get", req, err, codes.InvalidArgument, codes.NotFound, codes.Unavailable)
	}
	problem, m, _ := fx.requestProblem(req.GetResource(), nil)
	if problem == codes.OK && (req.GetName() == "" || strings.Contains(req.GetName()+req.GetNamespace(), "/")) {
		problem = codes.InvalidArgument
	}
	mask, maskProblem := maskOf(req.GetFields())
	if problem == codes.OK {
		problem = maskProblem
	}
	if problem != codes.OK {
		if err == nil {
			t.Fatalf("Get(%v) = %v, want %v", req, resp.GetObject(), problem)
		}
		return
	}
	// The object named by namespace and name, whatever its key looks like.
	var want *cached
	for _, o := range m.stateAt(m.cur) {
		if o.view.Metadata.Namespace == req.GetNamespace() && o.view.Metadata.Name == req.GetName() {
			want = o
		}
	}
	if want == nil {
		if err == nil {
			got := resp.GetObject()
			t.Fatalf("Get(%v) = the object named %q in namespace %q, want NOT_FOUND: no object has the namespace and name asked for", req, got.GetName(), got.GetNamespace())
		}
		checkStatus(t, "Get", req, err, codes.NotFound)
		return
	}
	if err != nil {
		t.Fatalf("Get(%v) = %v, want %s", req, err, want.key)
	}
	marshals(t, "Get", resp)
	got := resp.GetObject()
	if got.GetNamespace() != req.GetNamespace() || got.GetName() != req.GetName() || string(got.GetJson()) != shown(t, mask, want.json) {
		t.Fatalf("Get(%v) = %s/%s %s, want %s", req, got.GetNamespace(), got.GetName(), got.GetJson(), shown(t, mask, want.json))
	}
}

// pageLimit is the number of objects a List page may hold for limit.
func pageLimit(limit int64) int {
	switch {
	case limit == 0:
		return fuzzOptions.DefaultPageSize
	case limit > int64(fuzzOptions.MaxPageSize):
		return fuzzOptions.MaxPageSize
	}
	return int(limit)
}

func (fx *fuzzFixture) checkList(t *testing.T, req *pb.ListRequest) {
	resp, err := fx.srv.List(canceled(), req)
	problem, m, ref := fx.requestProblem(req.GetResource(), req.GetSelector())
	if problem == codes.OK && req.GetLimit() < 0 {
		problem = codes.InvalidArgument
	}
	mask, maskProblem := maskOf(req.GetFields())
	if problem == codes.OK {
		problem = maskProblem
	}
	mrvAhead := false
	if mrv := req.GetMinResourceVersion(); problem == codes.OK && mrv != "" {
		n, ok := object.ParseRV(mrv)
		if !ok {
			problem = codes.InvalidArgument
		}
		mrvAhead = ok && n > m.cur
	}
	tokenAhead := false
	if tok := req.GetContinueToken(); problem == codes.OK && tok != "" {
		// A token whose snapshot is ahead of the cache waits for it.
		if ct, err := indexer.ParseContinue(tok); err == nil {
			n, ok := object.ParseRV(ct.RV)
			tokenAhead = ok && n > m.cur
		}
	}
	if err != nil {
		allowed := []codes.Code{codes.InvalidArgument, codes.NotFound, codes.Unavailable}
		if req.GetContinueToken() != "" {
			allowed = append(allowed, codes.OutOfRange)
		}
		if mrvAhead || tokenAhead {
			// Waiting for the cache ends with the cancelled call.
			allowed = append(allowed, codes.Canceled)
		}
		checkStatus(t, "List", req, err, allowed...)
	}
	switch {
	case problem != codes.OK:
		if err == nil {
			t.Fatalf("List(%v) succeeded, want %v", req, problem)
		}
		return
	case mrvAhead:
		if err == nil {
			t.Fatalf("List(%v) at %d succeeded, want it to wait for min_resource_version", req, m.cur)
		}
		return
	case req.GetContinueToken() == "" && err != nil:
		t.Fatalf("List(%v) = %v, want the objects", req, err)
	case err != nil:
		return
	}
	marshals(t, "List", resp)
	limit := pageLimit(req.GetLimit())
	checkPage := func(page *pb.ListResponse) {
		t.Helper()
		if n := len(page.GetObjects()); n > limit || page.GetContinueToken() != "" && n == 0 {
			t.Fatalf("List(%v) page of %d objects with continue token %q; want 1 to %d objects when a token follows", req, n, page.GetContinueToken(), limit)
		}
		for i, o := range page.GetObjects() {
			v, ok := fx.viewOf(t, mask, string(o.GetJson()))
			if !ok {
				t.Fatalf("List(%v) returned %s/%s as %s, which the cache never held", req, o.GetNamespace(), o.GetName(), o.GetJson())
			}
			if !ref.matches(v) || o.GetNamespace() != v.Metadata.Namespace || o.GetName() != v.Metadata.Name {
				t.Fatalf("List(%v) returned %s/%s (labels %v), which the selector does not select", req, v.Metadata.Namespace, v.Metadata.Name, v.Metadata.Labels)
			}
			if i > 0 && object.KeyOf(v.Metadata.Namespace, v.Metadata.Name) <= object.KeyOf(page.GetObjects()[i-1].GetNamespace(), page.GetObjects()[i-1].GetName()) {
				t.Fatalf("List(%v) page is not in key order: %v", req, names(page.GetObjects()))
			}
		}
	}
	checkPage(resp)
	if req.GetContinueToken() != "" {
		return // a forged token: any page of any snapshot, if it selects
	}
	// Page through with the tokens returned: exactly the matching objects.
	want := sorted(m.stateAt(m.cur), ref)
	if resp.GetResourceVersion() != strconv.FormatUint(m.cur, 10) {
		t.Fatalf("List(%v) at resourceVersion %q, want %d", req, resp.GetResourceVersion(), m.cur)
	}
	var got []string
	page := resp
	for range len(want) + 1 {
		for _, o := range page.GetObjects() {
			got = append(got, object.KeyOf(o.GetNamespace(), o.GetName()))
		}
		if page.GetContinueToken() == "" {
			break
		}
		next := proto.CloneOf(req)
		next.ContinueToken = page.GetContinueToken()
		nextPage, err := fx.srv.List(canceled(), next)
		if err != nil {
			t.Fatalf("List(%v) with the token just returned = %v", next, err)
		}
		marshals(t, "List", nextPage)
		checkPage(nextPage)
		if nextPage.GetResourceVersion() != resp.GetResourceVersion() {
			t.Fatalf("page at resourceVersion %q, the first at %q", nextPage.GetResourceVersion(), resp.GetResourceVersion())
		}
		if n := len(page.GetObjects()); n < limit && len(nextPage.GetObjects()) > 0 {
			bytes := len(nextPage.GetObjects()[0].GetJson())
			for _, o := range page.GetObjects() {
				bytes += len(o.GetJson())
			}
			if bytes <= fuzzOptions.MaxPageBytes {
				t.Fatalf("List(%v): a page of %d objects (limit %d) ended early, though the next object fits in %d bytes", req, n, limit, fuzzOptions.MaxPageBytes)
			}
		}
		page = nextPage
	}
	var wantKeys []string
	for _, o := range want {
		wantKeys = append(wantKeys, o.key)
	}
	if diff := cmp.Diff(wantKeys, got); diff != "" {
		t.Fatalf("List(%v), every page (-want +got):\n%s", req, diff)
	}
}

// watchStream is the server side of a Watch stream; it records what is
// sent, as a client decodes it from what the server's codec encodes.
type watchStream struct {
	ctx  context.Context
	sent []*pb.WatchResponse
}

var _ pb.CacheService_WatchServer = (*watchStream)(nil)

func (s *watchStream) Context() context.Context { return s.ctx }

func (s *watchStream) Send(r *pb.WatchResponse) error {
	s.sent = append(s.sent, r)
	return nil
}

func (s *watchStream) SendMsg(m any) error {
	b, err := server.MarshalMsg(m)
	if err != nil {
		return fmt.Errorf("watch stream: send a %T: %w", m, err)
	}
	r := &pb.WatchResponse{}
	if err := proto.Unmarshal(b, r); err != nil {
		return fmt.Errorf("watch stream: a client cannot decode what was sent: %w", err)
	}
	return s.Send(r)
}

func (*watchStream) SetHeader(metadata.MD) error  { return nil }
func (*watchStream) SendHeader(metadata.MD) error { return nil }
func (*watchStream) SetTrailer(metadata.MD)       {}
func (*watchStream) RecvMsg(any) error            { return io.EOF }

func (fx *fuzzFixture) checkWatch(t *testing.T, req *pb.WatchRequest) {
	stream := &watchStream{ctx: canceled()}
	err := fx.srv.Watch(req, stream)
	for _, r := range stream.sent {
		marshals(t, "Watch", r)
	}
	code := checkStatus(t, "Watch", req, err, codes.InvalidArgument, codes.NotFound, codes.Unavailable, codes.OutOfRange, codes.Canceled)
	problem, m, ref := fx.requestProblem(req.GetResource(), req.GetSelector())
	mask, maskProblem := maskOf(req.GetFields())
	if problem == codes.OK {
		problem = maskProblem
	}
	var n uint64
	if rv := req.GetResourceVersion(); problem == codes.OK && rv != "" {
		var ok bool
		if n, ok = object.ParseRV(rv); !ok {
			problem = codes.InvalidArgument
		}
	}
	if problem != codes.OK {
		if code == codes.Canceled || len(stream.sent) > 0 {
			t.Fatalf("Watch(%v) = %v after %d events, want it refused with %v", req, err, len(stream.sent), problem)
		}
		return
	}
	cur := strconv.FormatUint(m.cur, 10)
	type event struct {
		Type pb.EventType
		Key  string
		RV   string
		JSON string
	}
	var want []event
	wantCode := codes.Canceled // the stream was open and ended with the call
	switch {
	case req.GetResourceVersion() != "" && n > m.cur:
		// Waits for the cache to get there; nothing is sent.
	case req.GetSendInitialEvents():
		for _, o := range sorted(m.stateAt(m.cur), ref) {
			want = append(want, event{pb.EventType_EVENT_TYPE_ADDED, o.key, cur, shown(t, mask, o.json)})
		}
		want = append(want, event{Type: pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END, RV: cur})
	case req.GetResourceVersion() == "":
	case n < m.floor:
		wantCode = codes.OutOfRange
	default:
		for _, c := range m.changes {
			if c.rv <= n {
				continue
			}
			was := c.prev != nil && ref.matches(c.prev.view)
			is := c.typ != pb.EventType_EVENT_TYPE_DELETED && ref.matches(c.obj.view)
			ev := event{Key: c.obj.key, RV: strconv.FormatUint(c.rv, 10), JSON: shown(t, mask, c.obj.json)}
			switch {
			case was && is && mask != nil && hidden(t, mask, c.prev.json, c.obj.json):
				continue // a change the mask does not show
			case was && is:
				ev.Type = pb.EventType_EVENT_TYPE_MODIFIED
			case is:
				ev.Type = pb.EventType_EVENT_TYPE_ADDED
			case was:
				ev.Type = pb.EventType_EVENT_TYPE_DELETED
			default:
				continue
			}
			want = append(want, ev)
		}
	}
	var got []event
	for _, r := range stream.sent {
		o := r.GetObject()
		ev := event{Type: r.GetType(), RV: r.GetResourceVersion(), JSON: string(o.GetJson())}
		if o != nil {
			ev.Key = object.KeyOf(o.GetNamespace(), o.GetName())
		}
		got = append(got, ev)
	}
	if code != wantCode {
		t.Fatalf("Watch(%v) ended with %v %q, want %v", req, code, status.Convert(err).Message(), wantCode)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Watch(%v) at %s, floor %d (-want +got):\n%s", req, cur, m.floor, diff)
	}
}

// hidden reports whether mask shows no change from prev to cur but their
// resourceVersions.
func hidden(t *testing.T, mask *projection.Mask, prev, cur []byte) bool {
	t.Helper()
	a, err := mask.ProjectObject(prev)
	if err != nil {
		t.Fatalf("project %s: %v", prev, err)
	}
	b, err := mask.ProjectObject(cur)
	if err != nil {
		t.Fatalf("project %s: %v", cur, err)
	}
	return a.SameBut(b)
}

func (fx *fuzzFixture) checkListResources(t *testing.T, req *pb.ListResourcesRequest) {
	resp, err := fx.srv.ListResources(canceled(), req)
	if err != nil {
		t.Fatalf("ListResources(%v) = %v", req, err)
	}
	marshals(t, "ListResources", resp)
	var got, want []string
	for _, r := range resp.GetResources() {
		got = append(got, fmt.Sprintf("%s synced=%v rv=%s objects=%d indexes=%v", r.GetName(), r.GetSynced(), r.GetResourceVersion(), r.GetObjectCount(), r.GetIndexes()))
	}
	for _, name := range fx.order {
		m := fx.models[name]
		rv := ""
		if m.synced {
			rv = strconv.FormatUint(m.cur, 10)
		}
		want = append(want, fmt.Sprintf("%s synced=%v rv=%s objects=%d indexes=%v", name, m.synced, rv, len(m.stateAt(m.cur)), m.indexes))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ListResources (-want +got):\n%s", diff)
	}
}
