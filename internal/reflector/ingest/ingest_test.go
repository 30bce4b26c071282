// Package ingest_test measures informerd's ingest on its own: the CPU one
// upstream watch event costs from the TLS connection to the cache entry,
// with no watcher connected. The upstream is a fake API server in a child
// process (this test binary run again), so that the process measured holds
// only informerd's side; kube-apiserver's own costs are the bench
// harness's (go run ./bench -scenarios=fanout, its 0-watcher rows).
package ingest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/informerd/informerd/internal/benchdata"
	"github.com/informerd/informerd/internal/deltafifo"
	"github.com/informerd/informerd/internal/fanout"
	"github.com/informerd/informerd/internal/indexer"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/reflector"
)

const (
	serverEnv = "INFORMERD_INGEST_UPSTREAM" // set in the child: events per second, 0 for as fast as read
	pods      = 2000
	nodes     = 100
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// TestUpstream is the child process: a fake API server over TLS and
// HTTP/2 that answers a streaming list of pods and then sends MODIFIED
// events of them at the rate in its environment, until stdin closes. It
// prints its URL on stdout. Without the environment variable it is
// skipped.
func TestUpstream(t *testing.T) {
	rateEnv, ok := os.LookupEnv(serverEnv)
	if !ok {
		t.Skip("the ingest benchmark's child process")
	}
	rate, err := strconv.Atoi(rateEnv)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(upstream(rate))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// upstream serves GET /api/v1/pods: a streaming list of the pods, their
// bookmark, then MODIFIED events at rate per second (0: as fast as the
// client reads).
func upstream(rate int) http.Handler {
	encode := func(typ string, p *corev1.Pod) []byte {
		// As kube-apiserver encodes a metav1.WatchEvent: type first.
		b, err := json.Marshal(struct {
			Type   string      `json:"type"`
			Object *corev1.Pod `json:"object"`
		}{typ, p})
		if err != nil {
			panic(err)
		}
		return append(b, '\n')
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/pods" || q.Get("watch") != "true" || q.Get("sendInitialEvents") != "true" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriterSize(w, 64<<10)
		rv := uint64(1000)
		for i := range pods {
			rv++
			_, _ = bw.Write(encode("ADDED", benchdata.Pod(i, nodes, rv)))
		}
		end := map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": map[string]any{
			"resourceVersion": strconv.FormatUint(rv, 10), "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}}
		b, _ := json.Marshal(end)
		_, _ = bw.Write(append(b, '\n'))
		_ = bw.Flush()
		w.(http.Flusher).Flush()
		// The events to send, encoded ahead so that the child's own CPU
		// does not pace them.
		events := make([][]byte, 4096)
		for i := range events {
			events[i] = encode("MODIFIED", benchdata.Pod(i%pods, nodes, 0))
		}
		var tick <-chan time.Time
		if rate > 0 {
			tk := time.NewTicker(time.Second / time.Duration(rate))
			defer tk.Stop()
			tick = tk.C
		}
		for i := 0; ; i++ {
			if tick != nil {
				select {
				case <-tick:
				case <-r.Context().Done():
					return
				}
			}
			rv++
			ev := setRV(events[i%len(events)], rv)
			if _, err := w.Write(ev); err != nil {
				return
			}
			if tick != nil || i%16 == 0 {
				w.(http.Flusher).Flush()
			}
		}
	})
}

// setRV writes rv into an event encoded with resourceVersion "0".
func setRV(ev []byte, rv uint64) []byte {
	return []byte(strings.Replace(string(ev), `"resourceVersion":"0"`, `"resourceVersion":"`+strconv.FormatUint(rv, 10)+`"`, 1))
}

// BenchmarkIngest is informerd's CPU per upstream event (cpu-µs/event,
// the process's user and system time over the events, measured with
// getrusage) and its allocations, with no watcher: reflector (informerd's
// raw client, client-go's Reflector), deltafifo, indexer with the node
// index and history, and a fan-out hub. Paced is 100 events/s, an idle
// process woken per event; Max is as fast as it reads.
func BenchmarkIngest(b *testing.B) {
	b.Run("Paced", func(b *testing.B) { benchmarkIngest(b, 100) })
	b.Run("Max", func(b *testing.B) { benchmarkIngest(b, 0) })
}

// BenchmarkReadOnly is the floor under BenchmarkIngest: the same stream
// over the same transport, read a line at a time and dropped. Paced, it is
// what any process pays to be woken by each event on this machine.
// HTTP1 reads over HTTP/1.1, as informerd's watches do by default; HTTP2
// over HTTP/2, as client-go's do (--api-server-watch-http2).
func BenchmarkReadOnly(b *testing.B) {
	for _, proto := range []struct {
		name       string
		nextProtos []string
	}{{"HTTP1", []string{"http/1.1"}}, {"HTTP2", nil}} {
		b.Run(proto.name+"/Paced", func(b *testing.B) { benchmarkReadOnly(b, 100, proto.nextProtos) })
		b.Run(proto.name+"/Max", func(b *testing.B) { benchmarkReadOnly(b, 0, proto.nextProtos) })
	}
}

func benchmarkReadOnly(b *testing.B, rate int, nextProtos []string) {
	url, stop := startUpstream(b, rate)
	defer stop()
	cfg := &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{Insecure: true, NextProtos: nextProtos}}
	cfg.ContentConfig.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	body, err := rc.Get().AbsPath("/api/v1/pods").Param("watch", "true").Param("sendInitialEvents", "true").Stream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			b.Fatal(err)
		}
		if strings.Contains(string(line), metav1.InitialEventsAnnotationKey) {
			break
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for n := 0; n < b.N; {
		_, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			n++
		case !errors.Is(err, bufio.ErrBufferFull):
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
}

func benchmarkIngest(b *testing.B, rate int) {
	url, stop := startUpstream(b, rate)
	defer stop()
	client, err := reflector.NewClient(&rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		b.Fatal(err)
	}
	enc, err := object.NewEncoder([]object.IndexSpec{{Name: "node", JSONPath: "{.spec.nodeName}"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	ix := indexer.New(enc.IndexNames(), indexer.Options{HistoryMaxEvents: 10000, HistoryMaxAge: 5 * time.Minute})
	hub := fanout.New(ix, fanout.Options{})
	defer hub.Close(nil)
	fifo := deltafifo.New(ix, 10000)
	refl := reflector.New(client.ListWatch(podsGVR, "", nil, enc.Prepare), enc, fifo, reflector.Options{Name: "pods", Client: client})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { refl.Run(ctx); fifo.Close() })
	wg.Go(func() { _ = fifo.Run(ctx, ix.Apply) })
	defer func() { cancel(); fifo.Close(); wg.Wait() }()

	for !ix.Stats().Synced {
		time.Sleep(10 * time.Millisecond)
	}
	from, _ := object.ParseRV(ix.Stats().ResourceVersion)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	// Polled, not waited for: a waiter would be woken by every event, a
	// cost of the benchmark's own.
	for {
		if rv, _ := object.ParseRV(ix.Stats().ResourceVersion); rv >= from+uint64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond * time.Duration(min(100, 1+rate)))
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startUpstream runs the child process and returns its URL.
func startUpstream(b *testing.B, rate int) (string, func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpstream$", "-test.v=false")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", serverEnv, rate))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "https://") {
		_ = cmd.Process.Kill()
		b.Fatalf("upstream child: %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(line), func() { _ = stdin.Close(); _ = cmd.Wait() }
}
