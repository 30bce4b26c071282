package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// getFlags are the flags of get (alias list) and watch.
type getFlags struct {
	sel    selection
	format string
	limit  int64
	minRV  string
	// fieldsFlag is --fields as given; fields its paths, once checked.
	fieldsFlag string
	fields     []string
	// watch lists (or gets), then watches; watchOnly watches without
	// listing first. rv watches the changes after it, without listing.
	watch     bool
	watchOnly bool
	rv        string
	maxEvents int
	coalesce  bool
}

// flagsOfWatches are the flags that only a watch uses.
var flagsOfWatches = []string{"resource-version", "max-events", "coalesce"}

func (f *getFlags) addFlags(cmd *cobra.Command) {
	f.sel.addFlags(cmd)
	fl := cmd.Flags()
	fl.Int64Var(&f.limit, "limit", 0, "objects per page of a list (default: the server's, 500); every page is fetched")
	fl.StringVar(&f.fieldsFlag, "fields", "", "only these fields of each object: comma-separated paths of JSON field names, e.g. metadata.labels,status.podIP (apiVersion, kind and metadata's name, namespace, uid and resourceVersion are always kept); a watch prints no change to other fields")
	fl.StringVar(&f.minRV, "min-resource-version", "", "list once the cache has reached this resourceVersion (bounded by --timeout)")
	fl.StringVar(&f.rv, "resource-version", "", "watch the changes after this resourceVersion, without listing first")
	fl.IntVar(&f.maxEvents, "max-events", 0, "exit after printing this many objects and events (0: watch until interrupted)")
	fl.BoolVar(&f.coalesce, "coalesce", false, "if this watch falls behind, collapse pending changes per object instead of having the stream ended")
	addOutputFlag(cmd, &f.format, objectFormats...)
}

func newGet(o *options) *cobra.Command {
	f := &getFlags{}
	cmd := &cobra.Command{
		Use:     "get TYPE [NAME]",
		Aliases: []string{"list"},
		Short:   "List the objects of a type, or get one by name; -w watches after",
		Long: `get lists the cached objects of a resource type (all namespaces unless -n),
narrowed by labels (-l) or one of the type's indexes (--index), or gets one
object by name. TYPE is a name informerctl resources lists, or the name it was
configured by (pods, deployments, deployments.apps, widgets.v1.example.com).

With -w it then watches: every change after the list is printed as it
happens, and a broken watch is resumed from the last resourceVersion printed,
so no change is missed or repeated. --watch-only watches without listing.
-o json and -o yaml print a List whose metadata.resourceVersion is the list's
snapshot: watch from it (--resource-version) to see what changed since.

--fields prints only those fields of each object (a field mask): paths of
the object's JSON field names separated by dots, a path through a list
applying to each element, a name with dots in backquotes
(metadata.labels.` + "`app.kubernetes.io/name`" + `). With -w, a change to other
fields only is not printed. The table's AGE and -o wide's LABELS need
metadata.creationTimestamp and metadata.labels among the fields.`,
		Example: `  informerctl get pods -n demo
  informerctl get pods --index node=node-1 -o wide
  informerctl get configmaps settings -n demo -o yaml
  informerctl get configmaps -l app=web -w
  informerctl get pods -n demo --fields metadata.labels,status.podIP -o json
  informerctl list configmaps -A -o name`,
		Args: typeAndName,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, o, args) },
	}
	f.addFlags(cmd)
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "after listing or getting, watch for changes")
	cmd.Flags().BoolVar(&f.watchOnly, "watch-only", false, "watch for changes without listing first")
	return cmd
}

func newWatch(o *options) *cobra.Command {
	f := &getFlags{watch: true}
	cmd := &cobra.Command{
		Use:   "watch TYPE [NAME]",
		Short: "Print the objects, then every change; resumes when the stream breaks (get -w)",
		Long: `watch is get -w: it prints the selected objects as ADDED, then every change,
until interrupted. With --resource-version it prints only the changes after
that version; with --changes-only the changes from now. When the stream breaks
(informerd shutting down or restarting, a slow stream ended, the connection
lost) it says so on stderr and watches again from the last resourceVersion it
printed, so no change is missed or repeated. A resourceVersion older than
informerd's history ends it with an error: list again and watch from the
list's resourceVersion. With --fields it prints only those fields of each
object, and no change to other fields only.`,
		Example: `  informerctl watch pods --index node=node-1
  informerctl watch pods -n demo --fields metadata.labels,status.podIP -o json
  informerctl watch configmaps -n demo --resource-version 4211 -o json`,
		Args: typeAndName,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, o, args) },
	}
	f.addFlags(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.watchOnly, "changes-only", false, "do not print the current objects first, only changes from now (get's --watch-only)")
	fl.Bool("bookmarks", false, "")
	_ = fl.MarkDeprecated("bookmarks", "bookmarks are no longer printed; the watch resumes from the latest one by itself")
	fl.Duration("resume-backoff", 0, "")
	_ = fl.MarkDeprecated("resume-backoff", "a broken watch is watched again about a second later (client-go's RetryWatcher)")
	return cmd
}

// typeAndName checks the arguments of get and watch: TYPE [NAME], or
// TYPE/NAME as kubectl takes them.
func typeAndName(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return fmt.Errorf("name a resource type: %s (`informerctl resources` lists the types)", cmd.UseLine())
	case len(args) > 2, len(args) == 2 && strings.Contains(args[0], "/"):
		return fmt.Errorf("too many arguments %q: %s gets one object at a time", args, cmd.UseLine())
	}
	if typ, name, ok := strings.Cut(args[0], "/"); ok && (typ == "" || name == "") {
		return fmt.Errorf("%q: write TYPE/NAME, or TYPE NAME", args[0])
	}
	return nil
}

// splitArgs returns the TYPE and NAME that typeAndName accepted.
func splitArgs(args []string) (resource, name string) {
	if len(args) == 2 {
		return args[0], args[1]
	}
	resource, name, _ = strings.Cut(args[0], "/")
	return resource, name
}

func (f *getFlags) watching() bool { return f.watch || f.watchOnly }

// check refuses flags that do not go together.
func (f *getFlags) check(cmd *cobra.Command, name string) error {
	if err := checkFormat(f.format, objectFormats...); err != nil {
		return err
	}
	fields, err := splitFields(f.fieldsFlag)
	if err != nil {
		return err
	}
	f.fields = fields
	changed := cmd.Flags().Changed
	if !f.watching() {
		for _, fl := range flagsOfWatches {
			if changed(fl) {
				return fmt.Errorf("--%s applies to watches: add -w or --watch-only", fl)
			}
		}
	}
	if f.rv == "0" {
		return errors.New(`--resource-version 0: give a resourceVersion from a list or an event, or leave it out to list first`)
	}
	if name == "" {
		return nil
	}
	switch {
	case f.sel.narrowed():
		return errors.New("a NAME cannot be combined with -l or --index: select by name, or by labels and indexes")
	case f.sel.allNamespaces:
		return errors.New("a NAME cannot be combined with -A: an object is got by name in one namespace (-n)")
	case !f.watching() && (changed("limit") || changed("min-resource-version")):
		return errors.New("--limit and --min-resource-version apply to lists, not to get TYPE NAME")
	}
	return nil
}

func (f *getFlags) run(cmd *cobra.Command, o *options, args []string) error {
	resource, name := splitArgs(args)
	if err := f.check(cmd, name); err != nil {
		return err
	}
	sel, err := f.sel.selector()
	if err != nil {
		return err
	}
	conn, c, err := o.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := cmd.Context()
	switch {
	case f.watching():
		return f.runWatch(ctx, o, c, resource, name, sel)
	case name != "":
		return f.getOne(ctx, o, c, resource, name, sel.GetNamespace())
	}
	objs, rv, err := f.list(ctx, o, c, resource, sel, false)
	if err != nil {
		return err
	}
	return printObjects(o.out, f.format, resource, objs, rv, false, sel.GetNamespace() == "")
}

func (f *getFlags) getOne(ctx context.Context, o *options, c pb.CacheServiceClient, resource, name, namespace string) error {
	var obj *pb.Object
	err := o.unary(ctx, func(ctx context.Context) error {
		resp, err := c.Get(ctx, &pb.GetRequest{Resource: resource, Namespace: namespace, Name: name, Fields: mask(f.fields)})
		obj = resp.GetObject()
		return err
	})
	if namespace == "" && client.ReasonOf(err) == pb.ErrorReason_OBJECT_NOT_FOUND {
		return fmt.Errorf("%w (an object in a namespace needs -n NAMESPACE)", err)
	}
	if err != nil {
		return err
	}
	return printObjects(o.out, f.format, resource, []*pb.Object{obj}, "", true, false)
}

// list returns every page of one snapshot of the selected objects, all
// within --timeout, and the snapshot's resourceVersion. onlyVersion asks for
// the resourceVersion alone (and the first object, if any).
func (f *getFlags) list(ctx context.Context, o *options, c pb.CacheServiceClient, resource string, sel *pb.Selector, onlyVersion bool) ([]*pb.Object, string, error) {
	req := &pb.ListRequest{Resource: resource, Selector: sel, Limit: f.limit, MinResourceVersion: f.minRV, Fields: mask(f.fields)}
	if onlyVersion {
		req.Limit = 1
	}
	var objs []*pb.Object
	var rv string
	err := o.unary(ctx, func(ctx context.Context) error {
		for {
			resp, err := c.List(ctx, req)
			if err != nil {
				return err
			}
			objs = append(objs, resp.GetObjects()...)
			if resp.GetContinueToken() == "" || onlyVersion {
				rv = resp.GetResourceVersion()
				return nil
			}
			req.ContinueToken, req.MinResourceVersion = resp.GetContinueToken(), ""
		}
	})
	return objs, rv, err
}
