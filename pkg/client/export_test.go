package client

// SetJitter makes the backoffs of ListWatches created afterwards draw
// their waits with f, until the returned func restores the default.
func SetJitter(f func(n int64) int64) (restore func()) {
	old := jitter
	jitter = f
	return func() { jitter = old }
}
