// Package object defines the form in which informerd caches a Kubernetes
// object: its JSON bytes, encoded once after the transform, plus the few
// fields needed for keys, selectors and indexes. Objects are immutable once
// built, so every stage may share them without copying or locking.
//
// An object's bytes are held hot (the JSON itself) or cold (a zstd frame
// compressed with its resource's dictionary, see Codec): a cold copy of an
// object is a new Object that replaces the hot one, never an edit of it.
// Readers get the JSON through Bytes or AppendBytes, which decompress a cold
// object and detect damaged stored bytes.
package object

import (
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
)

// Object is one cached Kubernetes object. It is never modified after
// Encoder.Encode returns it; a new version of the object is a new Object.
type Object struct {
	// Key is "namespace/name", or "name" for cluster-scoped objects.
	Key string
	// Namespace and Name share Key's memory.
	Namespace, Name string
	UID             string
	// ResourceVersion is the API server's, unchanged.
	ResourceVersion string
	// RV is ResourceVersion as a number, for ordering; 0 if it does not parse.
	RV uint64
	// Labels are the object's labels.
	Labels Labels
	// Values holds the object's index values, one slice per index, in the
	// order of the Encoder's index names. An index may yield several values.
	Values [][]string
	// data is the object as Kubernetes JSON (apiVersion and kind set)
	// after the transform when dict is nil (hot); else (cold) a zstd frame
	// of that JSON compressed with dict, rawLen bytes once decompressed.
	// Responses embed the JSON as it is (see AppendWireHeader).
	data   []byte
	dict   *Dict
	rawLen uint32
}

// Size is the approximate number of bytes the object holds: its stored
// bytes (compressed when cold) and its metadata.
func (o *Object) Size() int {
	n := len(o.Key) + len(o.UID) + len(o.ResourceVersion) + len(o.data) + 8*16
	for _, l := range o.Labels {
		n += len(l) + 16
	}
	for _, vs := range o.Values {
		n += 24
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return n
}

// Labels is a label set stored as alternating keys and values; for the few
// labels an object has it is smaller than a map and fast enough to scan.
type Labels []string

var _ labels.Labels = Labels(nil)

// Has reports whether the label key is present.
func (l Labels) Has(key string) bool {
	_, ok := l.lookup(key)
	return ok
}

// Get returns the value of the label key, or "".
func (l Labels) Get(key string) string {
	v, _ := l.lookup(key)
	return v
}

// Lookup returns the value of the label key and whether it is present.
func (l Labels) Lookup(key string) (string, bool) { return l.lookup(key) }

func (l Labels) lookup(key string) (string, bool) {
	for i := 0; i+1 < len(l); i += 2 {
		if l[i] == key {
			return l[i+1], true
		}
	}
	return "", false
}

// ParseRV parses a resourceVersion as the API server's etcd revision. It
// returns 0 and false for anything else; informerd then cannot order it.
func ParseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		// ParseUint returns the largest uint64 for an out-of-range number:
		// as an RV it would put the cache ahead of every later change.
		return 0, false
	}
	return n, true
}
