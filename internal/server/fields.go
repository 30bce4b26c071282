package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/limits"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/projection"
)

// Schemas checks a field mask's paths against a resource's schema.
type Schemas interface {
	// Check returns an error naming the first path r's schema does not
	// have, saying what it does have; nil when every path may exist,
	// including when the schema is not known.
	Check(ctx context.Context, r pipeline.Resolved, paths [][]string) error
}

// mask compiles a request's fields, refusing with INVALID_ARGUMENT a mask
// that is malformed or names a field the resource's schema does not have.
// No paths is the nil mask: the whole object.
func (s *Server) mask(ctx context.Context, p pipeline.Served, fields *fieldmaskpb.FieldMask) (*projection.Mask, error) {
	m, err := projection.Compile(fields.GetPaths())
	if err != nil {
		return nil, invalid("%v", err)
	}
	if m != nil && s.opts.Schemas != nil {
		if err := s.opts.Schemas.Check(ctx, p.Resolved(), m.Paths()); err != nil {
			return nil, invalid("%v", err)
		}
	}
	return m, nil
}

// projected returns o as m shows it: in new memory for this response, or o
// itself for the nil mask. An object the mask cannot be applied to (never
// one the cache holds) is returned whole rather than lost. It fails only
// on a cold object whose stored bytes are damaged.
func projected(m *projection.Mask, o *object.Object) (*object.Object, error) {
	if m == nil {
		return o, nil
	}
	json, err := o.Bytes()
	if err != nil {
		return nil, err
	}
	b, err := m.Project(json)
	if err != nil {
		return o, nil
	}
	return o.WithJSON(b), nil
}

// projectionLimit is the hub's refusal of one more distinct mask as the
// limit error clients see.
func projectionLimit(tm *fanout.TooManyProjectionsError, resource string) *limits.Exceeded {
	return &limits.Exceeded{Limit: "max-projections", Msg: fmt.Sprintf(
		"too many field masks: %d distinct masks are in use on %s, the most allowed (--max-projections); watch with a mask already in use, or with no fields", tm.Limit, resource)}
}
