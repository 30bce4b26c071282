package kubeapi

import "time"

// StartedAt makes h built at t, as if started then (the grace of reads
// while caches resolve).
func StartedAt(h *Handler, t time.Time) { h.built = t }
