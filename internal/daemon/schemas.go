package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/schema"
	"github.com/informerd/informerd/internal/server"
)

// schemaFetchTimeout bounds how long a request with a field mask waits for
// its resource's schema (the first on a group-version downloads it).
const schemaFetchTimeout = 10 * time.Second

// schemas checks field masks against the API server's OpenAPI v3 schemas.
// When a schema cannot be fetched, masks are not checked (a path the
// resource lacks then matches nothing), and the failure is logged at most
// once a minute: field masks keep working through an API server outage.
type schemas struct {
	src    *schema.Source
	log    *slog.Logger
	logged atomic.Int64 // unix nanoseconds of the last failure logged
}

var _ server.Schemas = (*schemas)(nil)

func newSchemas(restConfig *rest.Config, log *slog.Logger) (*schemas, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	return &schemas{src: schema.NewSource(dc.OpenAPIV3()), log: log}, nil
}

// Check implements server.Schemas.
func (s *schemas) Check(ctx context.Context, r pipeline.Resolved, paths [][]string) error {
	ctx, cancel := context.WithTimeout(ctx, schemaFetchTimeout)
	defer cancel()
	gvk := r.GVR.GroupVersion().WithKind(r.Kind)
	sch, err := s.src.For(ctx, gvk)
	if err != nil {
		if now := time.Now().UnixNano(); now-s.logged.Load() > int64(time.Minute) {
			s.logged.Store(now)
			s.log.Warn("field masks are not checked against the schema: it could not be fetched from the API server", "kind", gvk.String(), "err", err)
		}
		return nil
	}
	for _, p := range paths {
		if err := sch.Check(p); err != nil {
			return err
		}
	}
	return nil
}
