package kubeapi

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/object"
)

// TestFormsEncodeOnce: readers that miss the same key while it is being
// encoded wait for that encoding; none makes it again, and all get its
// bytes. Every watcher of an event wakes at once, so without this each of
// them that runs before the first finishes pays the encoding.
func TestFormsEncodeOnce(t *testing.T) {
	const readers = 50
	fs := newForms(DefaultMaxFormBytes)
	o := &object.Object{Key: "ns/pod", ResourceVersion: "7"}
	k := formKey{o: o, f: formProtobuf}
	var encodes atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	encode := func() ([]byte, error) {
		if encodes.Add(1) == 1 {
			close(started)
		}
		<-release
		return []byte("encoded"), nil
	}

	got := make([][]byte, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	wg.Go(func() { got[0], errs[0] = fs.keep(k, encode) })
	<-started // the first reader is inside encode
	for i := 1; i < readers; i++ {
		wg.Go(func() { got[i], errs[i] = fs.keep(k, encode) })
	}
	// Give the other readers time to miss; a reader that comes after the
	// release finds the kept bytes, and must not encode either.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()

	if n := encodes.Load(); n != 1 {
		t.Fatalf("%d readers encoded the same key; want 1", n)
	}
	for i := range readers {
		if errs[i] != nil || !bytes.Equal(got[i], []byte("encoded")) {
			t.Fatalf("reader %d got %q, %v", i, got[i], errs[i])
		}
	}
	if b, err := fs.keep(k, func() ([]byte, error) { t.Fatal("kept encoding made again"); return nil, nil }); err != nil || string(b) != "encoded" {
		t.Fatalf("after: %q, %v", b, err)
	}
}

// TestFormsEncodeFails: readers waiting on an encoding that fails or
// panics get an error, nothing is kept, and the next reader encodes
// afresh.
func TestFormsEncodeFails(t *testing.T) {
	failure := errors.New("cannot encode")
	for _, tc := range []struct {
		name    string
		fail    func()
		wantErr error
	}{
		{"error", func() {}, failure},
		{"panic", func() { panic("encoder bug") }, errEncodingPanicked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newForms(DefaultMaxFormBytes)
			k := formKey{o: &object.Object{Key: "ns/pod"}, f: formMetadata}
			started, release := make(chan struct{}), make(chan struct{})
			var first error
			var wg sync.WaitGroup
			wg.Go(func() {
				defer func() {
					if r := recover(); r != nil {
						first = fmt.Errorf("panicked: %v", r)
					}
				}()
				_, first = fs.keep(k, func() ([]byte, error) {
					close(started)
					<-release
					tc.fail()
					return nil, failure
				})
			})
			<-started
			var waiterErr error
			var waiterBytes []byte
			wg.Go(func() {
				waiterBytes, waiterErr = fs.keep(k, func() ([]byte, error) { return []byte("second"), nil })
			})
			time.Sleep(20 * time.Millisecond)
			close(release)
			wg.Wait()
			if first == nil {
				t.Fatal("the encoding reader saw no failure")
			}
			// The waiter either waited (the failure) or came after it and
			// encoded afresh (its own bytes); never the failed reader's bytes.
			if !errors.Is(waiterErr, tc.wantErr) && string(waiterBytes) != "second" {
				t.Fatalf("waiter got %q, %v; want %v or its own encoding", waiterBytes, waiterErr, tc.wantErr)
			}
			b, err := fs.keep(k, func() ([]byte, error) { return []byte("again"), nil })
			if err != nil || (string(b) != "again" && string(b) != "second") {
				t.Fatalf("after the failure: %q, %v; want a fresh encoding", b, err)
			}
			for i := range fs.shards {
				if n := len(fs.shards[i].making); n != 0 {
					t.Fatalf("shard %d still marks %d encodings as being made", i, n)
				}
			}
		})
	}
}
