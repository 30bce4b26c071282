package benchdata

import "runtime"

// HeapAfterGC returns the live heap after two collections: what the objects
// still referenced hold, for benchmarks of memory.
func HeapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
