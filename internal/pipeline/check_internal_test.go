package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
)

// fakeLister lists a fixed sequence of keys and resourceVersions, or fails.
type fakeLister struct {
	Source
	items []KeyVersion
	err   error
	pages int
}

func (f *fakeLister) ListExact(_ context.Context, _ Resolved, _ Selection, _ string, limit int64, _ time.Duration, page func([]KeyVersion) error) error {
	if f.err != nil {
		return f.err
	}
	items := f.items
	for {
		n := min(int(limit), len(items))
		if limit <= 0 {
			n = len(items)
		}
		f.pages++
		if err := page(items[:n]); err != nil {
			return err
		}
		items = items[n:]
		if len(items) == 0 {
			return nil
		}
	}
}

// checked returns a pipeline that caches objs (key → resourceVersion),
// synced and running as far as a check can tell, reading from src.
func checked(t testing.TB, objs map[string]uint64, src Source) *Pipeline {
	t.Helper()
	c := &config.Config{QueueLength: 16}
	p, err := New(c, config.Resource{Resource: "configmaps"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.checkOpts.PageSize = 3
	var top uint64 = 1
	var ds []deltafifo.Delta
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range objs {
			if !yield(k) {
				return
			}
		}
	}) {
		rv := objs[k]
		top = max(top, rv)
		o := (&object.Object{Key: k, Namespace: "ns", Name: k[len("ns/"):], ResourceVersion: strconv.FormatUint(rv, 10), RV: rv}).WithJSON([]byte(`{}`))
		ds = append(ds, deltafifo.Delta{Type: watch.Added, Object: o, ResourceVersion: o.ResourceVersion, Relist: true})
	}
	ds = append(ds, deltafifo.Delta{Type: watch.Bookmark, ResourceVersion: strconv.FormatUint(top, 10), Synced: true})
	p.index.Apply(ds)
	p.resolved = Resolved{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	p.refl = reflector.New(nil, p.encoder, p.fifo, reflector.Options{Name: "configmaps", Log: p.log})
	p.src = src
	return p
}

// TestComparisonFindsEveryDifference is a model test of the walk: a cache
// and an API server list that differ at random (objects missing on either
// side, other resourceVersions), read in pages of random sizes, must yield
// exactly the differences a comparison of the two as maps gives, the
// first of them in key order, and equal hashes exactly when nothing
// differs.
func TestComparisonFindsEveryDifference(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := range 300 {
		n := rng.IntN(40)
		cache := map[string]uint64{}
		server := map[string]uint64{}
		for i := range n {
			k := fmt.Sprintf("ns/o%03d", i)
			rv := uint64(10 + rng.IntN(100))
			switch rng.IntN(10) {
			case 0: // lost a create, or a delete
				server[k] = rv
			case 1: // lost a delete
				cache[k] = rv
			case 2: // lost an update
				cache[k], server[k] = rv, rv+1
			default:
				cache[k], server[k] = rv, rv
			}
		}
		var want []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range cache {
				yield(k)
			}
			for k := range server {
				if _, ok := cache[k]; !ok {
					yield(k)
				}
			}
		}) {
			if c, s := cache[k], server[k]; c != s {
				want = append(want, k)
			}
		}
		var items []KeyVersion
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range server {
				yield(k)
			}
		}) {
			items = append(items, KeyVersion{Key: k, ResourceVersion: strconv.FormatUint(server[k], 10)})
		}
		src := &fakeLister{items: items}
		p := checked(t, cache, src)
		p.checkOpts.PageSize = int64(1 + rng.IntN(5))
		r := p.CheckConsistency(context.Background())
		wantResult := CheckMatch
		if len(want) > 0 {
			wantResult = CheckMismatch
		}
		if r.Result != wantResult || r.Differences != len(want) || r.Objects != len(cache) || r.Listed != len(server) {
			t.Fatalf("seed %d round %d: %+v, want %s with %d differences %v", seed, round, r, wantResult, len(want), want)
		}
		for i, d := range r.Diff {
			if k := want[i]; d[:len(k)] != k {
				t.Fatalf("seed %d round %d: difference %d is %q, want one about %s", seed, round, i, d, k)
			}
		}
		if len(r.Diff) != min(len(want), maxDiffKeys) {
			t.Fatalf("seed %d round %d: %d differences named, want %d", seed, round, len(r.Diff), min(len(want), maxDiffKeys))
		}
		if (r.CacheHash == r.ServerHash) != (len(want) == 0) {
			t.Fatalf("seed %d round %d: hashes %016x, %016x with %d differences", seed, round, r.CacheHash, r.ServerHash, len(want))
		}
		if len(want) > 0 && !p.refl.Relisting() {
			t.Fatalf("seed %d round %d: a mismatch did not make the reflector list again", seed, round)
		}
	}
}

// TestCheckSkipsAndFails: a compacted resourceVersion is skipped, a failed
// list is an error, a list out of key order is an error rather than a
// wrong answer, and none of them starts a relist.
func TestCheckSkipsAndFails(t *testing.T) {
	cache := map[string]uint64{"ns/a": 5, "ns/b": 6}
	tests := []struct {
		name   string
		src    *fakeLister
		result string
	}{
		{"compacted", &fakeLister{err: apierrors.NewResourceExpired("too old resource version: 6 (40)")}, CheckSkipped},
		{"gone", &fakeLister{err: &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonGone, Message: "gone"}}}, CheckSkipped},
		{"failed", &fakeLister{err: apierrors.NewServiceUnavailable("etcd is down")}, CheckError},
		{"unordered", &fakeLister{items: []KeyVersion{{"ns/b", "6"}, {"ns/a", "5"}}}, CheckError},
		{"faithful", &fakeLister{items: []KeyVersion{{"ns/a", "5"}, {"ns/b", "6"}}}, CheckMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := checked(t, cache, tc.src)
			r := p.CheckConsistency(context.Background())
			if r.Result != tc.result || r.ResourceVersion != "6" {
				t.Fatalf("check = %+v, want %s at resourceVersion 6", r, tc.result)
			}
			if p.refl.Relisting() {
				t.Error("the check started a relist")
			}
			if got := p.Consistency(); got.Counts[tc.result] != 1 || got.Inconsistent {
				t.Errorf("Consistency = %+v, want one %s", got, tc.result)
			}
		})
	}
	t.Run("not synced", func(t *testing.T) {
		p := checked(t, cache, &fakeLister{})
		p.index = indexer.New(nil, indexer.Options{})
		if r := p.CheckConsistency(context.Background()); r.Result != CheckSkipped {
			t.Fatalf("check of an unsynced cache = %+v, want skipped", r)
		}
	})
	t.Run("not an exact lister", func(t *testing.T) {
		p := checked(t, cache, nil)
		if r := p.CheckConsistency(context.Background()); r.Result != CheckSkipped {
			t.Fatalf("check of a leaf = %+v, want skipped", r)
		}
	})
}

// BenchmarkIntegrityCheck measures informerd's side of a check of 100,000
// objects in pages of 500: the walk of the cache's snapshot beside the
// list, and the hashes (the list itself is the API server's cost).
func BenchmarkIntegrityCheck(b *testing.B) {
	const n = 100_000
	cache := make(map[string]uint64, n)
	items := make([]KeyVersion, 0, n)
	for i := range n {
		k := fmt.Sprintf("ns/pod-%06d", i)
		cache[k] = uint64(1000 + i)
		items = append(items, KeyVersion{Key: k, ResourceVersion: strconv.Itoa(1000 + i)})
	}
	p := checked(b, cache, &fakeLister{items: items})
	p.checkOpts.PageSize = 500
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := p.CheckConsistency(context.Background()); r.Result != CheckMatch {
			b.Fatalf("check = %+v", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/object")
}
