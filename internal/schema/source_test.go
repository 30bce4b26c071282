package schema_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"

	"github.com/informerd/informerd/internal/schema"
)

// fakeOpenAPI serves documents by index path ("apis/example.com/v1") and
// counts what it was asked.
type fakeOpenAPI struct {
	mu        sync.Mutex
	docs      map[string][]byte
	hash      map[string]int
	err       error
	indexes   int
	downloads int
}

var _ openapi.Client = (*fakeOpenAPI)(nil)

// newFake returns a fake serving testdata/widgets.json as example.com/v1,
// and a Source over it.
func newFake(t *testing.T) (*fakeOpenAPI, *schema.Source) {
	data, err := os.ReadFile("testdata/widgets.json")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeOpenAPI{docs: map[string][]byte{"apis/example.com/v1": data}, hash: map[string]int{}}
	return f, schema.NewSource(f)
}

func (f *fakeOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.indexes++
	if f.err != nil {
		return nil, f.err
	}
	paths := map[string]openapi.GroupVersion{}
	for p, data := range f.docs {
		paths[p] = fakeGV{f: f, url: fmt.Sprintf("/openapi/v3/%s?hash=%d", p, f.hash[p]), data: data}
	}
	return paths, nil
}

// set replaces the document at path, with a new hash.
func (f *fakeOpenAPI) set(path string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = data
	f.hash[path]++
}

func (f *fakeOpenAPI) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeOpenAPI) counts() (indexes, downloads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.indexes, f.downloads
}

type fakeGV struct {
	f    *fakeOpenAPI
	url  string
	data []byte
}

func (g fakeGV) Schema(string) ([]byte, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	g.f.downloads++
	return g.data, nil
}

func (g fakeGV) ServerRelativeURL() string { return g.url }

// wantCounts fails unless the fake was asked for the index and documents
// this many times.
func wantCounts(t *testing.T, f *fakeOpenAPI, indexes, downloads int) {
	t.Helper()
	if i, d := f.counts(); i != indexes || d != downloads {
		t.Fatalf("index read %d times and documents downloaded %d times, want %d and %d", i, d, indexes, downloads)
	}
}

func TestSourceCachesPerGroupVersion(t *testing.T) {
	f, src := newFake(t)
	ctx := context.Background()
	for range 3 {
		s, err := src.For(ctx, widgetGVK)
		if err != nil || s == nil {
			t.Fatalf("For(%s) = %v, %v", widgetGVK, s, err)
		}
	}
	if s, err := src.For(ctx, widgetGVK.GroupVersion().WithKind("WidgetList")); err != nil || s == nil {
		t.Fatalf("For(WidgetList) = %v, %v", s, err)
	}
	wantCounts(t, f, 1, 1)
}

func TestSourceNoSchema(t *testing.T) {
	_, src := newFake(t)
	for _, gvk := range []kschema.GroupVersionKind{
		widgetGVK.GroupVersion().WithKind("Gadget"),                // not in the document
		{Group: "other.example.com", Version: "v1", Kind: "Thing"}, // no document
		{Version: "v1", Kind: "Pod"},
	} {
		s, err := src.For(context.Background(), gvk)
		if s != nil || err != nil {
			t.Errorf("For(%s) = %v, %v; want nil, nil", gvk, s, err)
		}
	}
}

func TestSourceWithoutOpenAPI(t *testing.T) {
	f, src := newFake(t)
	f.fail(apierrors.NewNotFound(kschema.GroupResource{}, "/openapi/v3"))
	if s, err := src.For(context.Background(), widgetGVK); s != nil || err != nil {
		t.Errorf("For = %v, %v; want nil, nil", s, err)
	}
}

// TestSourceRefresh: a document older than MaxAge is checked against the
// index's hash, and downloaded again only when that changed.
func TestSourceRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, src := newFake(t)
		ctx := context.Background()
		check := func(path string) error {
			s, err := src.For(ctx, widgetGVK)
			if err != nil {
				t.Fatal(err)
			}
			return s.Check([]string{path})
		}
		if err := check("spec"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(schema.MaxAge)
		if err := check("spec"); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, f, 2, 1) // unchanged: not downloaded again

		f.set("apis/example.com/v1", []byte(`{"openapi": "3.0.0", "components": {"schemas": {"w": {
			"x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
			"type": "object", "properties": {"renamed": {"type": "string"}}}}}}`))
		if err := check("renamed"); err == nil {
			t.Fatal("the new schema was used before MaxAge")
		}
		time.Sleep(schema.MaxAge)
		if err := check("renamed"); err != nil {
			t.Fatalf("the new schema was not used after MaxAge: %v", err)
		}
		wantCounts(t, f, 3, 2)
	})
}

// TestSourceErrors: a failed fetch is answered with its error for
// RetryAfter, then tried again; a failed refresh keeps the schema fetched
// before.
func TestSourceErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, src := newFake(t)
		ctx := context.Background()
		down := errors.New("connection refused")
		f.fail(down)
		for range 2 {
			if _, err := src.For(ctx, widgetGVK); !errors.Is(err, down) {
				t.Fatalf("For = %v, want %v", err, down)
			}
		}
		wantCounts(t, f, 1, 0)

		f.fail(nil)
		time.Sleep(schema.RetryAfter)
		if s, err := src.For(ctx, widgetGVK); s == nil || err != nil {
			t.Fatalf("For after RetryAfter = %v, %v", s, err)
		}
		wantCounts(t, f, 2, 1)

		f.fail(down)
		time.Sleep(schema.MaxAge)
		for range 2 {
			if s, err := src.For(ctx, widgetGVK); s == nil || err != nil {
				t.Fatalf("For with the API server down = %v, %v; want the schema fetched before", s, err)
			}
		}
		wantCounts(t, f, 3, 1)
	})
}

func TestSourceCanceledIsNotCached(t *testing.T) {
	f, src := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.fail(context.Canceled) // as the real client fails with a canceled context
	if _, err := src.For(ctx, widgetGVK); err == nil {
		t.Fatal("For with a canceled context succeeded")
	}
	f.fail(nil)
	if s, err := src.For(context.Background(), widgetGVK); s == nil || err != nil {
		t.Fatalf("For after a canceled one = %v, %v", s, err)
	}
}

// TestSourceFetchesOnce: callers asking at once for a group-version wait
// for one download.
func TestSourceFetchesOnce(t *testing.T) {
	f, src := newFake(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if s, err := src.For(context.Background(), widgetGVK); s == nil || err != nil {
				t.Errorf("For = %v, %v", s, err)
			}
		})
	}
	wg.Wait()
	wantCounts(t, f, 1, 1)
}

// TestSourceBounded: past MaxDocuments group-versions, the least recently
// used one is dropped and fetched again when asked for.
func TestSourceBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, src := newFake(t)
		ctx := context.Background()
		if _, err := src.For(ctx, widgetGVK); err != nil {
			t.Fatal(err)
		}
		for i := range schema.MaxDocuments {
			time.Sleep(time.Millisecond) // each one used after the last
			if _, err := src.For(ctx, kschema.GroupVersionKind{Group: fmt.Sprintf("g%d.example.com", i), Version: "v1", Kind: "K"}); err != nil {
				t.Fatal(err)
			}
		}
		wantCounts(t, f, 1+schema.MaxDocuments, 1)
		if _, err := src.For(ctx, widgetGVK); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, f, 2+schema.MaxDocuments, 2)
	})
}
