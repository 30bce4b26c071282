package reflector

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/object"
)

// store is the Reflector viewed as client-go's ReflectorStore: what the
// Reflector calls for each event. It encodes and forwards to the queue.
type store Reflector

var (
	_ cache.ReflectorStore         = (*store)(nil)
	_ cache.ReflectorBookmarkStore = (*store)(nil)
	_ cache.TransformingStore      = (*store)(nil)
)

func (s *store) asRaw(obj any) (*object.Raw, error) {
	u, ok := obj.(*object.Raw)
	if !ok {
		return nil, fmt.Errorf("reflector %s: got %T, want *object.Raw", s.name, obj)
	}
	return u, nil
}

func (s *store) change(obj any, push func(*Reflector, *object.Raw) error) error {
	u, err := s.asRaw(obj)
	if err != nil {
		return err
	}
	(*Reflector)(s).received(u.GetResourceVersion())
	return push((*Reflector)(s), u)
}

// Add implements cache.ReflectorStore.
func (s *store) Add(obj any) error {
	return s.change(obj, func(r *Reflector, u *object.Raw) error {
		o, err := r.encoder.Encode(u)
		if err != nil {
			return err
		}
		return r.queue.Add(o)
	})
}

// Update implements cache.ReflectorStore.
func (s *store) Update(obj any) error {
	return s.change(obj, func(r *Reflector, u *object.Raw) error {
		o, err := r.encoder.Encode(u)
		if err != nil {
			return err
		}
		return r.queue.Update(o)
	})
}

// Delete implements cache.ReflectorStore.
func (s *store) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	return s.change(obj, func(r *Reflector, u *object.Raw) error {
		o, err := r.encoder.Encode(u)
		if err != nil {
			return err
		}
		return r.queue.Delete(o)
	})
}

// Replace implements cache.ReflectorStore: a full list at rv.
func (s *store) Replace(list []any, rv string) error {
	r := (*Reflector)(s)
	r.signals.Relists.Add(1)
	r.signals.LastError.Store("")
	r.received(rv)
	objs := make([]*object.Object, 0, len(list))
	for _, obj := range list {
		u, err := s.asRaw(obj)
		if err != nil {
			return err
		}
		o, err := r.encoder.Encode(u)
		if err != nil {
			return err
		}
		objs = append(objs, o)
	}
	return r.queue.Replace(objs, rv)
}

// Resync implements cache.ReflectorStore; informerd never resyncs.
func (s *store) Resync() error { return nil }

// Bookmark implements cache.ReflectorBookmarkStore.
func (s *store) Bookmark(rv string) error {
	(*Reflector)(s).received(rv)
	s.signals.LastError.Store("")
	return s.queue.Bookmark(rv)
}

// Transformer implements cache.TransformingStore, so objects the Reflector
// buffers during a streaming list are already stripped.
func (s *store) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		if u, ok := obj.(*object.Raw); ok {
			s.encoder.Transform(u)
		}
		return obj, nil
	}
}
