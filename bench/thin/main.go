// Command thin is a benchmark child: what a sidecar's application does
// instead of running an informer — list the pods of its node from informerd
// by index and watch them, optionally only some of their fields. It prints
// one JSON line when watching, then answers each "counts" line on its stdin
// with a JSON line of what its watch has received, and runs until its stdin
// closes. It links only grpc and the API, as a real thin client would.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/bench/internal/childproc"
	"github.com/informerd/informerd/bench/internal/wirecount"
)

func main() { runThinChild(os.Args[1:]) }

func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	// Fixed windows, as informerd's Go client package sets (client.Dial,
	// not linked here to keep this client thin): no PING per message.
	return grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
		grpc.WithStaticStreamWindowSize(4 << 20), grpc.WithStaticConnWindowSize(16 << 20)}, opts...)...)
}

// runThinChild lists the pods of one node from informerd and watches them:
// what a sidecar's application does instead of running an informer.
func runThinChild(args []string) {
	fs := flag.NewFlagSet("thin", flag.ExitOnError)
	addr := fs.String("addr", "", "")
	node := fs.String("node", "", "")
	fields := fs.String("fields", "", "comma-separated field mask paths of the List and Watch (empty: whole objects)")
	_ = fs.Parse(args)
	var mask *fieldmaskpb.FieldMask
	if *fields != "" {
		mask = &fieldmaskpb.FieldMask{Paths: strings.Split(*fields, ",")}
	}
	counter := &wirecount.Counter{}
	conn, err := dial(*addr, grpc.WithStatsHandler(counter))
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	defer conn.Close()
	client := pb.NewCacheServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sel := &pb.Selector{Index: &pb.IndexSelector{Name: "node", Values: []string{*node}}}
	list, err := client.List(ctx, &pb.ListRequest{Resource: "pods", Selector: sel, Limit: 5000, Fields: mask})
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	// Bookmarks allowed, as a client that resumes would ask: with a mask,
	// they carry the resourceVersion past the changes it does not see.
	w, err := client.Watch(ctx, &pb.WatchRequest{Resource: "pods", Selector: sel, ResourceVersion: list.GetResourceVersion(),
		AllowBookmarks: true, Fields: mask})
	if err != nil {
		childproc.Ready(childproc.Report{Error: err.Error()})
		return
	}
	var ended atomic.Bool
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				ended.Store(true)
				return
			}
		}
	}()
	childproc.Announce(childproc.Report{HeapLive: childproc.LiveHeap(), Objects: len(list.GetObjects())})
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "counts" {
			fmt.Printf("{\"error\":%q}\n", "unknown command "+in.Text())
			continue
		}
		_ = json.NewEncoder(os.Stdout).Encode(wirecount.Report{Counts: counter.Counts(), Ended: ended.Load()})
	}
}
