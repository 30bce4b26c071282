// Command thin is a benchmark child: what a sidecar's application does
// instead of running an informer — list the pods of its node from informerd
// by index and watch them. It prints one JSON line when watching and runs
// until its stdin closes. It links only grpc and the API, as a real thin
// client would.
package main

import (
	"context"
	"flag"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/bench/internal/childproc"
)

func main() { runThinChild(os.Args[1:]) }

func dial(addr string) (*grpc.ClientConn, error) {
	// Fixed windows, as informerd's Go client package sets (client.Dial,
	// not linked here to keep this client thin): no PING per message.
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithStaticStreamWindowSize(4<<20), grpc.WithStaticConnWindowSize(16<<20))
}

// runThinChild lists the pods of one node from informerd and watches them:
// what a sidecar's application does instead of running an informer.
func runThinChild(args []string) {
	fs := flag.NewFlagSet("thin", flag.ExitOnError)
	addr := fs.String("addr", "", "")
	node := fs.String("node", "", "")
	_ = fs.Parse(args)
	conn, err := dial(*addr)
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	defer conn.Close()
	client := pb.NewCacheServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sel := &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{*node}}}
	list, err := client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: sel, Limit: 5000})
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	w, err := client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: sel, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				return
			}
		}
	}()
	childproc.Ready(childproc.Report{HeapLive: childproc.LiveHeap(), Objects: len(list.GetObjects())})
}
