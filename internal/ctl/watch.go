package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

type watchFlags struct {
	sel           selection
	format        string
	rv            string
	changesOnly   bool
	bookmarks     bool
	coalesce      bool
	maxEvents     int
	resumeBackoff time.Duration
}

func newWatch(o *options) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch RESOURCE",
		Short: "Stream changes; resumes from the last resourceVersion when the stream breaks",
		Long: `watch prints the selected objects as ADDED, then every change, until
interrupted. With --resource-version it prints only the changes after that
version. When the stream breaks (informerd shutting down or restarting, a
slow stream ended, the connection lost) it watches again from the last
resourceVersion it printed, so no change is missed or repeated. A
resourceVersion older than informerd's history ends it with an error: list
again and watch from the list's resourceVersion.`,
		Example: `  informerctl watch pods --index node=node-1
  informerctl watch configmaps -n demo --resource-version 4211 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(f.format, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			s, err := f.sel.selector()
			if err != nil {
				return err
			}
			conn, c, err := o.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			return runWatch(cmd.Context(), o, c, args[0], s, f)
		},
	}
	f.sel.addFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.rv, "resource-version", "", "print the changes after this resourceVersion (and not the current objects)")
	fl.BoolVar(&f.changesOnly, "changes-only", false, "do not print the current objects first, only changes from now")
	fl.BoolVar(&f.bookmarks, "bookmarks", false, "also print BOOKMARK events (the latest resourceVersion, sent about once a minute)")
	fl.BoolVar(&f.coalesce, "coalesce", false, "if this client falls behind, collapse pending changes per object instead of having the stream ended")
	fl.IntVar(&f.maxEvents, "max-events", 0, "exit after this many ADDED, MODIFIED or DELETED events (0: run until interrupted)")
	fl.DurationVar(&f.resumeBackoff, "resume-backoff", 200*time.Millisecond, "first wait before watching again after the stream broke (doubles up to 5s)")
	addOutputFlag(cmd, &f.format, formatTable, formatJSON, formatYAML)
	return cmd
}

// watchEvent is how -o json and -o yaml print an event.
type watchEvent struct {
	Type            string          `json:"type"`
	ResourceVersion string          `json:"resourceVersion"`
	Object          json.RawMessage `json:"object,omitempty"`
}

func runWatch(ctx context.Context, o *options, c pb.CacheServiceClient, resource string, sel *pb.Selector, f watchFlags) error {
	lastRV := f.rv
	initial := f.rv == "" && !f.changesOnly
	connected := false // a stream was admitted once: breaks after that are resumed
	printed := 0
	backoff := wait.Backoff{Duration: f.resumeBackoff, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}
	if f.format == formatTable {
		fmt.Fprintf(o.out, "%-10s %-20s %-40s %s\n", "EVENT", "NAMESPACE", "NAME", "RESOURCEVERSION")
	}
	for {
		req := &pb.WatchRequest{Resource: resource, Selector: sel, ResourceVersion: lastRV, SendInitialEvents: initial, AllowBookmarks: true}
		if f.coalesce {
			req.SlowConsumerPolicy = pb.SlowConsumerPolicy_SLOW_CONSUMER_POLICY_COALESCE
		}
		err := func() error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := c.Watch(sctx, req)
			if err != nil {
				return err
			}
			for {
				ev, err := stream.Recv()
				if err != nil {
					return err
				}
				connected = true
				backoff.Duration = f.resumeBackoff
				lastRV = ev.GetResourceVersion()
				switch ev.GetType() {
				case pb.EventType_EVENT_TYPE_INITIAL_EVENTS_END:
					// Resume from here on: the current objects are printed.
					initial = false
					continue
				case pb.EventType_EVENT_TYPE_BOOKMARK:
					if !f.bookmarks {
						continue
					}
				default:
					printed++
				}
				if err := printEvent(o.out, f.format, ev); err != nil {
					return err
				}
				if f.maxEvents > 0 && printed >= f.maxEvents {
					return errMaxEvents
				}
			}
		}()
		switch {
		case errors.Is(err, errMaxEvents), ctx.Err() != nil:
			return nil
		case !connected || !resumable(err):
			return explain(err, o.conn.Address)
		}
		wait := backoff.Step()
		from := lastRV
		if initial {
			from = "the start (the current objects were not all printed yet)"
		}
		fmt.Fprintf(o.errOut, "informerctl: the watch broke (%v); watching again from resourceVersion %s in %s\n", explain(err, o.conn.Address), from, wait)
		if initial {
			lastRV = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

var errMaxEvents = errors.New("enough events")

// resumable says whether a broken watch is watched again from its last
// resourceVersion: informerd shutting down, unreachable or not ready, the
// stream ended for being slow, and a stream that ended without a status.
func resumable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	var e *client.Error
	if !errors.As(client.FromError(err), &e) {
		return false
	}
	return e.Code == codes.Unavailable || e.Reason == pb.ErrorReason_SLOW_CONSUMER
}

func printEvent(w io.Writer, format string, ev *pb.WatchResponse) error {
	typ := strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")
	switch format {
	case formatJSON, formatYAML:
		b, err := json.Marshal(watchEvent{Type: typ, ResourceVersion: ev.GetResourceVersion(), Object: ev.GetObject().GetJson()})
		if err != nil {
			return err
		}
		if format == formatJSON {
			_, err = fmt.Fprintf(w, "%s\n", b)
			return err
		}
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%-10s %-20s %-40s %s\n", typ, ev.GetObject().GetNamespace(), ev.GetObject().GetName(), ev.GetResourceVersion())
	return err
}
