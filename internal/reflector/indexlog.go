package reflector

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/informerd/informerd/internal/object"
)

// maxFailing bounds how many objects indexFailures remembers.
const maxFailing = 10000

// indexFailures logs that an index expression failed on an object once,
// when it starts failing, rather than at each of the object's events and
// relists. It remembers which indexes fail on which objects and forgets an
// object when they succeed again, when it is deleted and when a relist no
// longer holds it. It remembers at most maxFailing objects: failures on
// more are still counted (informerd_index_errors_total) and are logged
// together once. Its methods may be called concurrently.
type indexFailures struct {
	log *slog.Logger

	mu      sync.Mutex
	failing map[string][]string // object key → the indexes failing on it
	full    bool                // that more fail has been logged
}

// queued records the indexes that failed on o, a queued version of an
// object, and logs those that did not fail on the version before.
func (f *indexFailures) queued(o *object.Object, failed []object.IndexError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(failed) == 0 {
		if _, ok := f.failing[o.Key]; ok {
			delete(f.failing, o.Key)
			f.shrunk()
		}
		return
	}
	if f.failing == nil {
		f.failing = make(map[string][]string)
	}
	f.track(f.failing, f.failing[o.Key], o, failed)
}

// deleted forgets the object of key.
func (f *indexFailures) deleted(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.failing, key)
	f.shrunk()
}

// failedObject is an object of a relist and the indexes that failed on it.
type failedObject struct {
	o      *object.Object
	failed []object.IndexError
}

// relisted replaces what is remembered with the failures of a queued full
// list: objects it does not hold are gone.
func (f *indexFailures) relisted(objs []failedObject) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make(map[string][]string, len(objs))
	for _, fo := range objs {
		f.track(next, f.failing[fo.o.Key], fo.o, fo.failed)
	}
	f.failing = next
	f.shrunk()
}

// track logs the failures of o not among was, the indexes that failed on
// its previous version, and remembers them in into when there is room.
// An object not remembered and without room is not logged either: it may
// have been logged before.
func (f *indexFailures) track(into map[string][]string, was []string, o *object.Object, failed []object.IndexError) {
	_, in := into[o.Key]
	room := in || len(into) < maxFailing
	names := make([]string, 0, len(failed))
	for _, e := range failed {
		names = append(names, e.Index)
		if room && !slices.Contains(was, e.Index) {
			f.log.Warn("an index expression failed on an object, which is left out of that index until the expression succeeds on it",
				"object", o.Key, "resourceVersion", o.ResourceVersion, "index", e.Index, "err", e.Err)
		}
	}
	if room {
		into[o.Key] = names
		return
	}
	if !f.full {
		f.full = true
		f.log.Warn("index expressions fail on too many objects to log each; informerd_index_errors_total counts every failure",
			"objects", len(into))
	}
}

// shrunk lets the overflow be logged again once half the room is free.
func (f *indexFailures) shrunk() {
	if len(f.failing) < maxFailing/2 {
		f.full = false
	}
}
