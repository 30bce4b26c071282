package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/testenv"
)

// diffCase is one request of the differential suite, sent as it is to the
// API server and to informerd with the same credentials. Paths and
// queries name the world's values as placeholders ({ns}, {rv}, ...; see
// diffWorld.vars), expanded when the request is sent.
type diffCase struct {
	name string
	// method is GET unless set.
	method      string
	path, query string
	// accept is the Accept header; header holds other headers.
	accept string
	header http.Header
	// code is the status the API server answers the first request with
	// (200 unless set): a check of the table itself.
	code int
	// before runs just before the first request, with no wait for
	// informerd after it.
	before func(t *testing.T)
	// between runs once both servers have answered the first request (a
	// list's first page) or both watches are open; a watch then reads
	// until it sees between's last write.
	between func(t *testing.T)
	// pages is how many more pages a list follows its continue token for;
	// next is added to the query of each of them.
	pages int
	next  string
	// endsEarly: the API server ends the watch before the case's last
	// write (it cannot encode an event).
	endsEarly bool
	// route is how informerd must answer: routeCache (the default), or
	// routeForward, or routeAny where it may decide either way.
	route string
}

// How informerd answers a case: from its cache, or by forwarding it.
const (
	routeCache   = "from its cache"
	routeForward = "forwarded to the API server"
	routeAny     = "any"
)

// diffServer is one of the two servers a case is sent to.
type diffServer struct {
	name   string
	client *http.Client
	base   string
}

func (w *diffWorld) servers() [2]diffServer {
	return [2]diffServer{
		{"the API server", w.direct, env.Config.Host},
		{"informerd", w.cached, w.k.d.KubeAPIURL()},
	}
}

// Table is what kubectl get asks for.
const (
	tableAccept    = "application/json;as=Table;v=v1;g=meta.k8s.io"
	metaAccept     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	metaListAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

// Reading a watch: the API server has directReadTimeout to show a case's
// last write, informerd cachedGrace more after the API server did.
const (
	directReadTimeout = 30 * time.Second
	cachedGrace       = 10 * time.Second
)

// both runs f for each server at once and returns their errors.
func both(f func(i int, s diffServer) error, servers [2]diffServer) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range servers {
		wg.Go(func() { errs[i] = f(i, s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send sends one request of c to s.
func (w *diffWorld) send(ctx context.Context, s diffServer, c diffCase, target string) (*http.Response, error) {
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.base, "/")+target, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.header {
		r.Header[k] = vs
	}
	if c.accept != "" {
		r.Header.Set("Accept", c.accept)
	}
	r.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := s.client.Do(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s to %s: %w", method, target, s.name, err)
	}
	return resp, nil
}

// checkRoute fails the test unless informerd answered the n requests
// of case c as c.route says, counting from the routes seen before them:
// a case informerd forwarded compares the API server with itself.
func (w *diffWorld) checkRoute(t *testing.T, c diffCase, n int, answered, forwarded int) {
	t.Helper()
	var a, f int
	// A watch is counted once informerd has seen its client leave.
	if !testenv.Poll(10*time.Second, func() bool {
		a, f = w.routes(t)
		return a+f >= answered+forwarded+n
	}) {
		t.Errorf("informerd counted %d of the case's %d requests as answered or forwarded", a+f-answered-forwarded, n)
		return
	}
	got := routeCache
	switch {
	case f-forwarded == n:
		got = routeForward
	case a-answered != n:
		got = fmt.Sprintf("%d of %d requests from its cache, the rest forwarded", a-answered, n)
	}
	want := c.route
	if want == "" {
		want = routeCache
	}
	if want != routeAny && got != want {
		t.Errorf("informerd answered %s, the case expects it %s", got, want)
	}
	if got != routeCache {
		t.Logf("informerd answered %s", got)
	}
}

// isWatch reports whether the API server takes path and query as a watch.
func isWatch(path, query string) bool {
	if strings.Contains(path, "/watch/") {
		return true
	}
	q, _ := url.ParseQuery(query)
	v := q.Get("watch")
	return v == "true" || v == "1"
}

// run sends c to both servers and returns their answers, the API
// server's first: one per request (each page of a list), or the events
// of a watch. It leaves both servers with the same objects for the next
// case.
func (w *diffWorld) run(t *testing.T, c diffCase) (direct, cached []answer) {
	t.Helper()
	defer w.settle(t)
	w.last = lastWrite{}
	if c.before != nil {
		c.before(t)
	}
	target := w.expand(c.path)
	if q := w.expand(c.query); q != "" {
		target += "?" + q
	}
	if isWatch(c.path, c.query) {
		d, ca := w.watch(t, c, target)
		return []answer{d}, []answer{ca}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out [2][]answer
	var tokens [2]string
	page := func(i int, s diffServer, target string) error {
		resp, err := w.send(ctx, s, c, target)
		if err != nil {
			return err
		}
		a, token, err := readAnswer(resp)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		out[i], tokens[i] = append(out[i], a), token
		return nil
	}
	if err := both(func(i int, s diffServer) error { return page(i, s, target) }, w.servers()); err != nil {
		t.Fatal(err)
	}
	if c.between != nil {
		c.between(t)
	}
	next := w.expand(c.next)
	for range c.pages {
		if tokens[0] == "" && tokens[1] == "" {
			break
		}
		if err := both(func(i int, s diffServer) error {
			if tokens[i] == "" {
				return nil
			}
			return page(i, s, continued(target, tokens[i])+next)
		}, w.servers()); err != nil {
			t.Fatal(err)
		}
	}
	return out[0], out[1]
}

// continued is target with its continue parameter set to token.
func continued(target, token string) string {
	path, query, _ := strings.Cut(target, "?")
	q, _ := url.ParseQuery(query)
	q.Set("continue", token)
	return path + "?" + q.Encode()
}

// watch opens the watch target on both servers, runs c.between, and reads
// each stream until it shows the last write of between (or an ERROR, or
// it ends): the API server's for at most directReadTimeout, informerd's
// for cachedGrace more.
func (w *diffWorld) watch(t *testing.T, c diffCase, target string) (direct, cached answer) {
	t.Helper()
	var (
		out     [2]answer
		events  [2]<-chan eventFacts
		cancels [2]context.CancelFunc
	)
	defer func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel()
			}
		}
	}()
	if err := both(func(i int, s diffServer) error {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		resp, err := w.send(ctx, s, c, target)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			a, _, err := readAnswer(resp)
			out[i] = a
			return err
		}
		out[i] = answer{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), ContentEncoding: resp.Header.Get("Content-Encoding")}
		events[i] = streamEvents(ctx, decoded(resp))
		return nil
	}, w.servers()); err != nil {
		t.Fatal(err)
	}
	if c.between != nil {
		c.between(t)
	}
	last := w.last
	stop := func(ev eventFacts) bool {
		if ev.Type == "ERROR" {
			return true
		}
		return last.name != "" && ev.Name == last.name &&
			((last.deleted && ev.Type == "DELETED") || (!last.deleted && ev.ResourceVersion == last.rv))
	}
	type result struct {
		events []eventFacts
		end    string
	}
	var results [2]chan result
	quits := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	for i := range events {
		results[i] = make(chan result, 1)
		if events[i] == nil {
			results[i] <- result{}
			continue
		}
		go func() {
			var r result
			defer func() { results[i] <- r }()
			for {
				select {
				case ev, ok := <-events[i]:
					if !ok {
						r.end = "closed"
						return
					}
					r.events = append(r.events, ev)
					if stop(ev) {
						return
					}
				case <-quits[i]:
					r.end = "timeout"
					return
				}
			}
		}()
	}
	directTimer := time.AfterFunc(directReadTimeout, func() { close(quits[0]) })
	defer directTimer.Stop()
	rd := <-results[0]
	cachedTimer := time.AfterFunc(cachedGrace, func() { close(quits[1]) })
	defer cachedTimer.Stop()
	rc := <-results[1]
	if events[0] != nil {
		out[0].Events, out[0].End = rd.events, rd.end
	}
	if events[1] != nil {
		out[1].Events, out[1].End = rc.events, rc.end
	}
	if last.name != "" && out[0].Code == http.StatusOK && out[0].End != "" && !c.endsEarly {
		t.Errorf("the API server's watch did not show the case's last write (%s of %s): the case is wrong", map[bool]string{true: "deletion", false: "rv " + last.rv}[last.deleted], last.name)
	}
	return out[0], out[1]
}
