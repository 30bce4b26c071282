// Command reader is a benchmark child: the floor under any cache's ingest.
// It watches the pods of a namespace as informerd does (client-go's
// transport from a kubeconfig, JSON, one HTTP/1.1 connection) and reads
// each event's line and drops it: no decoding, no cache. Its CPU per event
// is what merely being woken by each event and reading it costs a Go
// process on the machine. It prints one JSON line when its watch is open
// and runs until its stdin closes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/bench/internal/childproc"
)

func main() {
	fs := flag.NewFlagSet("reader", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	ns := fs.String("namespace", "", "")
	_ = fs.Parse(os.Args[1:])
	if err := run(*kubeconfig, *ns); err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
	}
}

func run(kubeconfig, ns string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	list, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	wc := rest.CopyConfig(cfg)
	wc.NextProtos = []string{"http/1.1"}
	hc, err := rest.HTTPClientFor(wc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := wc.Host + "/api/v1/namespaces/" + ns + "/pods?watch=true&allowWatchBookmarks=true&resourceVersion=" + list.ResourceVersion
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("watch: " + resp.Status)
	}
	go func() {
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			if _, err := br.ReadSlice('\n'); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	}()
	childproc.Announce(childproc.Report{})
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}
