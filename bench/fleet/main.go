// Command fleet is a benchmark child: many unmodified client-go pod
// informers in one process, informer i on the pods of one node
// (fieldSelector spec.nodeName), all sharing one transport, so that over
// TLS their watches are streams of one HTTP/2 connection (or of a few,
// past the server's streams per connection), as the informers of one
// busy process are. It records what each informer's handler is told
// after the informers synced, and what each informer asked the server.
//
// It prints one JSON line when every informer has synced, then answers
// each command on its stdin with one line, and runs until stdin closes:
//
//	stats        a JSON line of the counts since the last mark
//	mark         start the counts again (answers the counts before)
//	take <file>  write the receipts so far to file, a line "informer rv unix-nanoseconds" each, forget them, and answer the count written
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/bench/internal/childproc"
)

func main() { runFleet(os.Args[1:]) }

// Stats are the counts a fleet answers "stats" with, since its last mark.
// An informer resumed when a watch of its was answered 200 and it sent no
// list (a relist) since the mark.
type Stats struct {
	Received int64 `json:"received"` // handler notifications
	Watches  int64 `json:"watches"`  // watch requests answered 200
	Lists    int64 `json:"lists"`    // lists, and watches with sendInitialEvents (a list streamed)
	Refused  int64 `json:"refused"`  // requests answered with a status other than 200
	Failed   int64 `json:"failed"`   // requests that got no response (connection refused or reset)
	Errors   int64 `json:"errors"`   // calls of client-go's watch error handler
	Resumed  int   `json:"resumed"`
	Relisted int   `json:"relisted"`
	// RefusedBy counts the refused requests by status code, and Refusals
	// holds the first of each code with its body (a Status, which says
	// why).
	RefusedBy map[int]int64  `json:"refusedBy,omitempty"`
	Refusals  map[int]string `json:"refusals,omitempty"`
}

// fleet is the informers' shared record. Its methods are called from the
// informers' goroutines and the command loop at once.
type fleet struct {
	first int // the harness's number of informer 0

	mu       sync.Mutex
	synced   bool
	stats    Stats
	watched  []bool // a watch answered 200 since the mark, by informer
	listed   []bool // a list sent since the mark, by informer
	receipts []string
}

func (f *fleet) record(i int, rv string) {
	now := time.Now().UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return
	}
	f.stats.Received++
	f.receipts = append(f.receipts, fmt.Sprintf("%d %s %d", f.first+i, rv, now))
}

// request counts informer i's request and its answer.
func (f *fleet) request(i int, r *http.Request, resp *http.Response, err error) {
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	list := !watch || q.Get("sendInitialEvents") == "true"
	f.mu.Lock()
	defer f.mu.Unlock()
	if list {
		f.listed[i] = true // a list after the mark is a relist, whatever its answer
	}
	switch {
	case err != nil:
		f.stats.Failed++
	case resp.StatusCode != http.StatusOK:
		f.stats.Refused++
		if f.stats.RefusedBy == nil {
			f.stats.RefusedBy, f.stats.Refusals = map[int]int64{}, map[int]string{}
		}
		f.stats.RefusedBy[resp.StatusCode]++
		if _, ok := f.stats.Refusals[resp.StatusCode]; !ok {
			// Read the Status the client is about to read, and give it a
			// copy.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			f.stats.Refusals[resp.StatusCode] = fmt.Sprintf("%s %s: %d %s", r.Method, r.URL.RequestURI(), resp.StatusCode, body)
		}
	case list:
		f.stats.Lists++
	default:
		f.stats.Watches++
		f.watched[i] = true
	}
}

func (f *fleet) watchError() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Errors++
}

func (f *fleet) snapshot() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.RefusedBy = maps.Clone(s.RefusedBy)
	for i := range f.watched {
		if f.listed[i] {
			s.Relisted++
		} else if f.watched[i] {
			s.Resumed++
		}
	}
	return s
}

func (f *fleet) mark() Stats {
	s := f.snapshot()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats = Stats{}
	clear(f.watched)
	clear(f.listed)
	return s
}

func (f *fleet) take(path string) (int, error) {
	f.mu.Lock()
	lines := f.receipts
	f.receipts = nil
	f.stats.Received = 0
	f.mu.Unlock()
	data := strings.Join(lines, "\n")
	if len(lines) > 0 {
		data += "\n"
	}
	return len(lines), os.WriteFile(path, []byte(data), 0o600)
}

// counted is informer i's transport: the fleet's shared one, counting.
type counted struct {
	base http.RoundTripper
	f    *fleet
	i    int
}

func (t counted) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	t.f.request(t.i, r, resp, err)
	return resp, err
}

func runFleet(args []string) {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	ns := fs.String("namespace", "", "")
	first := fs.Int("first", 0, "the harness's number of the first informer: informer i watches node (first+i) mod nodes")
	count := fs.Int("count", 1, "informers")
	nodes := fs.Int("nodes", 1, "")
	syncTimeout := fs.Duration("sync-timeout", 5*time.Minute, "")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	// One transport (TLS, HTTP/2, credentials) for every informer, as one
	// process's clients share client-go's cached transport.
	base, err := rest.TransportFor(cfg)
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	f := &fleet{first: *first, watched: make([]bool, *count), listed: make([]bool, *count)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var synced []cache.InformerSynced
	var infs []cache.SharedIndexInformer
	for i := range *count {
		// The node name as the harness's nodeName gives it.
		node := fmt.Sprintf("node-%03d", (*first+i)%*nodes)
		kube, err := kubernetes.NewForConfig(&rest.Config{Host: cfg.Host, APIPath: cfg.APIPath, QPS: 1000, Burst: 2000,
			Transport: counted{base: base, f: f, i: i}})
		if err != nil {
			childproc.Ready(childproc.Report{Error: err.Error()})
			return
		}
		factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(*ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + node }))
		inf := factory.Core().V1().Pods().Informer()
		_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) { f.watchError() })
		record := func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				f.record(i, p.ResourceVersion)
			}
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: record, DeleteFunc: record, UpdateFunc: func(_, o any) { record(o) },
		})
		if err != nil {
			childproc.Ready(childproc.Report{Error: err.Error()})
			return
		}
		synced = append(synced, reg.HasSynced)
		infs = append(infs, inf)
		factory.Start(ctx.Done())
	}
	syncCtx, stop := context.WithTimeout(ctx, *syncTimeout)
	defer stop()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		n := 0
		for _, s := range synced {
			if s() {
				n++
			}
		}
		childproc.Ready(childproc.Report{Error: fmt.Sprintf("%d of %d informers synced within %v", n, *count, *syncTimeout)})
		return
	}
	objects := 0
	for _, inf := range infs {
		objects += len(inf.GetStore().ListKeys())
	}
	f.mu.Lock()
	f.synced = true
	f.mu.Unlock()
	f.mark()
	childproc.Announce(childproc.Report{HeapLive: childproc.LiveHeap(), Objects: objects})
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "stats":
			_ = out.Encode(f.snapshot())
		case "mark":
			_ = out.Encode(f.mark())
		case "take":
			n, err := f.take(arg)
			if err != nil {
				fmt.Printf("{\"error\":%q}\n", err.Error())
				continue
			}
			fmt.Printf("{\"taken\":%d}\n", n)
		default:
			fmt.Printf("{\"error\":%q}\n", "unknown command "+cmd)
		}
	}
}
