package indexer

import "github.com/informerd/informerd/internal/object"

// Corrupt puts o in the cache in place of the object at o.Key, without an
// event, a history entry or a new resourceVersion: the silent divergence a
// bug in informerd would leave behind. It exists for the tests of the
// integrity checks (internal/pipeline), which must find it; nothing else
// calls it.
func (ix *Indexer) Corrupt(o *object.Object) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	prev, _ := ix.getLocked(o.Key)
	ix.put(prev, o)
	ix.views.expire(ix.history.floor, ix.version)
}
