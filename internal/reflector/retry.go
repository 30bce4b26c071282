package reflector

import "time"

// Retries. client-go's Reflector backs off after a failed list or watch
// with wait.Backoff.DelayWithReset(clock, 2*time.Minute): 0.8 s doubling to
// 30 s, each wait drawn from [d, 2d), and reset only when 2 minutes have
// passed since its previous reset, however long the watch was healthy in
// between. Outages a minute apart therefore each start from where the last
// one left off: a leaf whose root replicas were killed six times in a row
// took 5 s to recover from the first and 54 s from the sixth (issue 36;
// TestRecoveryDoesNotGrow in internal/backoff shows the same pattern).
//
// So the reflector spaces its own attempts with r.backoff (internal/backoff:
// full jitter, from [0, 1 s) doubling to [0, 30 s), reset once the watch
// has been healthy for 5 s): every list and watch waits what the last
// failure drew; a failed list or watch, an ERROR event, a watch that closes
// at once and a change that could not be cached count as failures; an
// admitted watch, an event, a bookmark and a list count as health.
// client-go's own backoff is set to clientGoFloor, a constant, so it adds
// next to nothing and never grows.

// clientGoFloor is client-go's Reflector's wait after a failure, which
// r.backoff's wait overlaps: a floor against a tight loop on a failure
// r.backoff was not told of.
const clientGoFloor = 50 * time.Millisecond
