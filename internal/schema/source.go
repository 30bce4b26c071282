package schema

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
)

const (
	// MaxAge is how long a group-version's schemas are used before the API
	// server's /openapi/v3 index is asked again whether they changed (its
	// entries carry a hash of each document); only a changed document is
	// downloaded again. So a CRD's new schema is checked against within
	// MaxAge, and a CRD served after its group-version was found without
	// schemas is validated within MaxAge.
	MaxAge = time.Minute
	// RetryAfter is how long a failed fetch is answered with its error
	// before the API server is asked again.
	RetryAfter = 30 * time.Second
	// MaxDocuments bounds the group-versions whose schemas are kept; the
	// least recently used one is dropped first.
	MaxDocuments = 256
)

// Source fetches and keeps the schemas of kinds from the API server's
// OpenAPI v3 documents, one per group-version, fetched the first time one
// of its kinds is asked for. Its methods may be called concurrently.
type Source struct {
	client openapi.ClientWithContext

	mu   sync.Mutex
	docs map[kschema.GroupVersion]*document
}

// document is one group-version's schemas and the state of their fetch.
// Only the goroutine holding fetching fetches it; the other fields are
// guarded by the Source's mu.
type document struct {
	fetching chan struct{} // a semaphore of one

	kinds   map[kschema.GroupVersionKind]*Schema // nil until fetched
	url     string                               // the index's URL of what kinds came from, with its hash
	checked time.Time                            // when url was last seen in the index
	err     error                                // the last fetch's, if it failed
	failed  time.Time
	used    time.Time
}

// NewSource returns a Source over client, as a discovery client's
// OpenAPIV3() returns it.
func NewSource(client openapi.Client) *Source {
	return &Source{client: openapi.ToClientWithContext(client), docs: map[kschema.GroupVersion]*document{}}
}

// For returns the schema of kind gvk, fetching its group-version's document
// with ctx when it has none younger than MaxAge. It returns nil and no
// error when the API server publishes no schema for the kind (a CRD
// without one, or no OpenAPI v3 at all): then nothing can be checked. A
// fetch's error is returned, for RetryAfter to every caller unless a schema
// fetched before is still there, which is then used a while longer.
func (s *Source) For(ctx context.Context, gvk kschema.GroupVersionKind) (*Schema, error) {
	d := s.document(gvk.GroupVersion())
	if sch, ok, err := s.cached(d, gvk); ok {
		return sch, err
	}
	select {
	case d.fetching <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("schema of %s: %w", gvk, ctx.Err())
	}
	defer func() { <-d.fetching }()
	if sch, ok, err := s.cached(d, gvk); ok {
		return sch, err // another caller fetched it meanwhile
	}
	s.mu.Lock()
	url := d.url
	s.mu.Unlock()
	kinds, newURL, err := s.fetch(ctx, gvk.GroupVersion(), url)

	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up; the next one tries again.
		return nil, err
	case err != nil:
		d.err, d.failed = err, now
		if d.kinds == nil {
			return nil, err
		}
	case kinds != nil:
		d.kinds, d.url, d.checked, d.err = kinds, newURL, now, nil
	default: // unchanged
		d.checked, d.err = now, nil
	}
	return d.kinds[gvk], nil
}

// document returns gv's entry, made and the least recently used one
// dropped if need be.
func (s *Source) document(gv kschema.GroupVersion) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.docs[gv]
	if d == nil {
		if len(s.docs) >= MaxDocuments {
			s.evictLocked()
		}
		d = &document{fetching: make(chan struct{}, 1)}
		s.docs[gv] = d
	}
	d.used = time.Now()
	return d
}

func (s *Source) evictLocked() {
	var oldest kschema.GroupVersion
	var oldestUse time.Time
	for gv, d := range s.docs {
		if oldestUse.IsZero() || d.used.Before(oldestUse) {
			oldest, oldestUse = gv, d.used
		}
	}
	delete(s.docs, oldest)
}

// cached answers from d when its schemas are fresh, or its last fetch
// failed less than RetryAfter ago; ok is false when d must be fetched.
func (s *Source) cached(d *document, gvk kschema.GroupVersionKind) (*Schema, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if d.err != nil && now.Sub(d.failed) < RetryAfter {
		if d.kinds != nil {
			return d.kinds[gvk], true, nil
		}
		return nil, true, d.err
	}
	if d.kinds != nil && now.Sub(d.checked) < MaxAge {
		return d.kinds[gvk], true, nil
	}
	return nil, false, nil
}

// fetch reads gv's entry in the /openapi/v3 index and, unless its URL is
// still url, downloads and parses its document. It returns nil kinds when
// the document is unchanged, and empty ones when the index has no entry for
// gv.
func (s *Source) fetch(ctx context.Context, gv kschema.GroupVersion, url string) (map[kschema.GroupVersionKind]*Schema, string, error) {
	paths, err := s.client.PathsWithContext(ctx)
	if apierrors.IsNotFound(err) {
		return map[kschema.GroupVersionKind]*Schema{}, "", nil // an API server without OpenAPI v3
	}
	if err != nil {
		return nil, "", fmt.Errorf("schema: read the OpenAPI v3 index: %w", err)
	}
	entry, ok := paths[indexPath(gv)]
	if !ok {
		return map[kschema.GroupVersionKind]*Schema{}, "", nil
	}
	newURL := entry.ServerRelativeURL()
	if url != "" && newURL == url {
		return nil, url, nil
	}
	data, err := entry.SchemaWithContext(ctx, "application/json")
	if err != nil {
		return nil, "", fmt.Errorf("schema: fetch the OpenAPI v3 document of %s: %w", gv, err)
	}
	kinds, err := Parse(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", gv, err)
	}
	return kinds, newURL, nil
}

// indexPath is gv's key in the /openapi/v3 index.
func indexPath(gv kschema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
