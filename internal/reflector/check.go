package reflector

import "fmt"

// ReasonInconsistent is why Relist made the Reflector list again: an
// integrity check found the cache different from the API server's list at
// the cache's own resourceVersion.
const ReasonInconsistent = "inconsistent"

// Relist makes client-go's Reflector list again, as a missed change does
// (see gap): the watch ends, nothing more is queued until the list is, and
// the list is diffed against the cache, so that watchers see exactly the
// objects that differ. why is shown on /readyz until a change is queued.
// It is refused (false) while a list is already due.
func (r *Reflector) Relist(why error) bool {
	if r.gap.open() {
		return false
	}
	err := fmt.Errorf("%s: %w", ReasonInconsistent, why)
	r.signals.LastError.Store(err.Error())
	r.log.Error("the cache differs from the API server's list at its resourceVersion; listing again", "err", why)
	r.gap.record()
	return true
}

// Relisting reports whether a list is due: a change was missed, or Relist
// was called, and no list has been queued since.
func (r *Reflector) Relisting() bool { return r.gap.open() }
