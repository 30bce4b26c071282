package kubeapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/kubeproto"
)

// podFrame is a pod's protobuf watch frame, as client-go's informers read.
func podFrame(t testing.TB, i int) []byte {
	t.Helper()
	p := benchdata.Pod(i, 10, uint64(1000+i))
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := kubeproto.Message(p.GroupVersionKind(), js)
	if err != nil {
		t.Fatal(err)
	}
	obj := kubeproto.Object(p.GroupVersionKind(), msg)
	return append(kubeproto.AppendWatchFrameHeader(nil, "MODIFIED", obj), obj...)
}

// TestGzipMemberReadsAlone: a client reading a compressed watch must get
// each shared member's whole frame as soon as that member arrives, before
// the next one (or the end of the stream) does, as it would from the API
// server's perFlushGzipWriter. Go's gzip.Reader holds a member's final
// block until the next member starts, so the data must come in a block of
// its own, ended by a sync flush.
func TestGzipMemberReadsAlone(t *testing.T) {
	pr, pw := io.Pipe()
	frames := [][]byte{podFrame(t, 1), podFrame(t, 2), []byte("x"), podFrame(t, 3)}
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, len(frames))
	done := make(chan struct{})
	defer func() {
		// Unblocks the reader and any write still waiting, then waits for
		// the reader: nothing outlives the test.
		_ = pr.CloseWithError(io.ErrClosedPipe)
		<-done
	}()
	go func() {
		defer close(done)
		z, err := gzip.NewReader(pr)
		if err != nil {
			got <- read{err: err}
			return
		}
		for _, f := range frames {
			b := make([]byte, len(f))
			if _, err := io.ReadFull(z, b); err != nil {
				got <- read{err: err}
				return
			}
			got <- read{b: b}
		}
	}()
	for i, f := range frames {
		m, err := gzipMember(f)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = pw.Write(m) }() // the pipe blocks until read; the reader may need only part of it
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("frame %d: %v", i, r.err)
			}
			if !bytes.Equal(r.b, f) {
				t.Fatalf("frame %d read back as %d different bytes", i, len(r.b))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d: the reader did not get it from its member alone", i)
		}
	}
}
