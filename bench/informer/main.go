// Command informer is a benchmark child: one client-go SharedIndexInformer
// on the pods of a namespace, as a service that caches pods itself runs it.
// It prints one JSON line when synced and runs until its stdin closes.
package main

import (
	"context"
	"flag"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/bench/internal/childproc"
)

func main() { runInformerChild(os.Args[1:]) }

// runInformerChild runs one client-go SharedIndexInformer on the pods of
// a namespace, as a service that caches pods itself would.
func runInformerChild(args []string) {
	fs := flag.NewFlagSet("informer", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	ns := fs.String("namespace", "", "")
	strip := fs.Bool("strip-managed-fields", false, "")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(*ns))
	if *strip {
		factory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(*ns),
			informers.WithTransform(func(o any) (any, error) {
				if m, ok := o.(metav1.Object); ok {
					m.SetManagedFields(nil)
				}
				return o, nil
			}))
	}
	inf := factory.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	childproc.Ready(childproc.Report{HeapLive: childproc.LiveHeap(), Objects: len(inf.GetStore().ListKeys())})
}
