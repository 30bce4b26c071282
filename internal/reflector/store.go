package reflector

import (
	"errors"
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/object"
)

// store is the Reflector viewed as client-go's ReflectorStore: what the
// Reflector calls for each event. It encodes and forwards to the queue, and
// records a change as received only once it is queued.
//
// client-go's Reflector only logs an error a store returns for a watch
// event, then resumes after the event as if it were stored. So a watch
// event that cannot be encoded or queued opens a gap instead (see gap):
// the watch ends with 410 Expired, the Reflector lists again, and the
// deltafifo's diff of that list against the cache yields the change.
// Such an event's Add, Update, Delete or Bookmark returns nil, having
// logged the failure; client-go would only log it again, with the whole
// object. A list that cannot be encoded or queued fails its Replace, which
// makes client-go list again.
type store Reflector

var (
	_ cache.ReflectorStore         = (*store)(nil)
	_ cache.ReflectorBookmarkStore = (*store)(nil)
	_ cache.TransformingStore      = (*store)(nil)
)

// Reasons a change was not queued, the reason label of
// informerd_cache_ingest_errors_total.
const (
	// ReasonEncode means the object could not be encoded.
	ReasonEncode = "encode"
	// ReasonQueue means the queue refused the change.
	ReasonQueue = "queue"
)

func (s *store) asRaw(obj any) (*object.Raw, error) {
	u, ok := obj.(*object.Raw)
	if !ok {
		return nil, fmt.Errorf("reflector %s: got %T, want *object.Raw", s.name, obj)
	}
	return u, nil
}

// change encodes obj and queues it with push.
func (s *store) change(op string, obj any, push func(*object.Object) error) error {
	r := (*Reflector)(s)
	u, err := s.asRaw(obj)
	if err != nil {
		return err
	}
	if r.gap.open() {
		// The relist that fills the gap brings this change too; queued
		// now, it would move the cache past the one missing.
		return nil
	}
	o, failed, err := r.encoder.EncodeWithIndexErrors(u)
	if err != nil {
		r.missed(ReasonEncode, fmt.Errorf("%s: %w", op, err), "object", object.KeyOf(u.Namespace, u.Name), "resourceVersion", u.ResourceVersion)
		return nil
	}
	if err := push(o); err != nil {
		r.missed(ReasonQueue, fmt.Errorf("%s %s: %w", op, o.Key, err), "object", o.Key, "resourceVersion", o.ResourceVersion)
		return nil
	}
	if op == "delete" {
		r.indexFailures.deleted(o.Key)
	} else {
		r.indexFailures.queued(o, failed)
	}
	r.received(o.ResourceVersion)
	return nil
}

// missed records a change or list that was not queued: counted by reason,
// logged with attrs naming it, shown on /readyz until a list is queued,
// and a gap that ends the watches (a streaming list's too, which client-go
// leaves open when its Replace fails). A queue closed because informerd is
// stopping is none of that.
func (r *Reflector) missed(reason string, err error, attrs ...any) {
	if errors.Is(err, deltafifo.ErrClosed) {
		return
	}
	switch reason {
	case ReasonEncode:
		r.signals.EncodeErrors.Add(1)
	case ReasonQueue:
		r.signals.QueueErrors.Add(1)
	}
	r.signals.LastError.Store(err.Error())
	r.backoff.Failed()
	r.log.Error("a change from the API server was not cached; listing again to recover it",
		append(attrs, "reason", reason, "err", err)...)
	r.gap.record()
}

// Add implements cache.ReflectorStore.
func (s *store) Add(obj any) error {
	return s.change("add", obj, s.queue.Add)
}

// Update implements cache.ReflectorStore.
func (s *store) Update(obj any) error {
	return s.change("update", obj, s.queue.Update)
}

// Delete implements cache.ReflectorStore.
func (s *store) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	return s.change("delete", obj, s.queue.Delete)
}

// Replace implements cache.ReflectorStore: a full list at rv. Queued, it
// fills the gap a missed change left. Once it returns, the watch whose
// streaming list it was is told (streamHooks.listed): stored, it applies
// the changes after the list from then on; not, it ends.
func (s *store) Replace(list []any, rv string) (err error) {
	r := (*Reflector)(s)
	defer func() {
		if listed := r.listed.Swap(nil); listed != nil {
			listed.tell(err == nil)
		}
	}()
	if r.resume.skipReplace(list, rv) {
		// The answer to a resumed first list: the cache holds the objects.
		return nil
	}
	if err := r.resume.checkList(rv); err != nil {
		return err
	}
	objs := make([]*object.Object, 0, len(list))
	var failures []failedObject
	for _, obj := range list {
		u, err := s.asRaw(obj)
		if err != nil {
			return err
		}
		o, failed, err := r.encoder.EncodeWithIndexErrors(u)
		if err != nil {
			err = fmt.Errorf("list at resourceVersion %s: %w", rv, err)
			r.missed(ReasonEncode, err, "object", object.KeyOf(u.Namespace, u.Name), "resourceVersion", u.ResourceVersion)
			return err
		}
		objs = append(objs, o)
		if failed != nil {
			failures = append(failures, failedObject{o: o, failed: failed})
		}
	}
	if err := r.queue.Replace(objs, rv); err != nil {
		err = fmt.Errorf("list at resourceVersion %s: %w", rv, err)
		r.missed(ReasonQueue, err, "resourceVersion", rv)
		return err
	}
	r.gap.fill()
	r.indexFailures.relisted(failures)
	r.signals.Relists.Add(1)
	r.received(rv)
	return nil
}

// Resync implements cache.ReflectorStore; informerd never resyncs.
func (s *store) Resync() error { return nil }

// Bookmark implements cache.ReflectorBookmarkStore.
func (s *store) Bookmark(rv string) error {
	r := (*Reflector)(s)
	if p := r.caughtUp.Load(); p != nil && *p == rv && r.caughtUp.CompareAndSwap(p, nil) {
		return nil // a streamWatch's, which applied up to rv itself
	}
	if r.gap.open() {
		return nil
	}
	if err := s.queue.Bookmark(rv); err != nil {
		r.missed(ReasonQueue, fmt.Errorf("bookmark: %w", err), "resourceVersion", rv)
		return nil
	}
	r.received(rv)
	return nil
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
