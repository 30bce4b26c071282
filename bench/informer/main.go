// Command informer is a benchmark child: one client-go SharedIndexInformer
// on the pods of a namespace, as a service that caches pods itself runs it.
// It prints one JSON line when synced and runs until its stdin closes.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/bench/internal/childproc"
)

func main() { runInformerChild(os.Args[1:]) }

// runInformerChild runs client-go SharedIndexInformers on the pods of a
// namespace, as services that cache pods themselves do: one, or with
// --count many, each with its own watch (a fleet of sidecars in one
// process). After its ready line, each "count" line on stdin is answered
// with the number of event handler notifications since the informers
// synced, and each "heap" line with the heap live after a forced GC.
func runInformerChild(args []string) {
	fs := flag.NewFlagSet("informer", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	ns := fs.String("namespace", "", "")
	strip := fs.Bool("strip-managed-fields", false, "")
	count := fs.Int("count", 1, "")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	opts := []informers.SharedInformerOption{informers.WithNamespace(*ns)}
	if *strip {
		opts = append(opts, informers.WithTransform(func(o any) (any, error) {
			if m, ok := o.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return o, nil
		}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var notified atomic.Int64
	var synced atomic.Bool
	count1 := func(any) {
		if synced.Load() {
			notified.Add(1)
		}
	}
	var infs []cache.SharedIndexInformer
	var kube *kubernetes.Clientset
	for i := range *count {
		if i%100 == 0 {
			// A connection per 100 informers, as separate processes
			// would have one each.
			c := rest.CopyConfig(cfg)
			c.Dial = (&net.Dialer{}).DialContext
			kube = kubernetes.NewForConfigOrDie(c)
		}
		factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, opts...)
		inf := factory.Core().V1().Pods().Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: count1, DeleteFunc: count1, UpdateFunc: func(_, o any) { count1(o) },
		})
		factory.Start(ctx.Done())
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	}
	synced.Store(true)
	childproc.Announce(childproc.Report{HeapLive: childproc.LiveHeap(), Objects: len(infs[0].GetStore().ListKeys())})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "count":
			fmt.Println(notified.Load())
		case "heap":
			fmt.Println(childproc.LiveHeap())
		}
	}
}
