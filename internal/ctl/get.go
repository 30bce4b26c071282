package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// selection holds the flags that choose objects.
type selection struct {
	namespace, labels, index string
}

func (s *selection) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&s.namespace, "namespace", "n", "", "only this namespace (default: all namespaces)")
	f.StringVarP(&s.labels, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&s.index, "index", "", "index selector NAME=VALUE[,VALUE...], e.g. node=node-1 (informerctl resources lists the indexes)")
}

func (s *selection) selector() (*pb.Selector, error) {
	sel := &pb.Selector{Namespace: s.namespace, LabelSelector: s.labels}
	if s.index != "" {
		name, values, ok := strings.Cut(s.index, "=")
		if !ok || name == "" || values == "" {
			return nil, fmt.Errorf("--index %q: write NAME=VALUE[,VALUE...]", s.index)
		}
		sel.Index = &pb.IndexSelector{Name: name, Values: strings.Split(values, ",")}
	}
	return sel, nil
}

func newGet(o *options) *cobra.Command {
	var namespace, format string
	cmd := &cobra.Command{
		Use:     "get RESOURCE NAME",
		Short:   "Print one object from the cache",
		Example: "  informerctl get configmaps settings -n demo -o yaml",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatYAML, formatName); err != nil {
				return err
			}
			resp, err := call(cmd.Context(), o, func(ctx context.Context, c pb.CacheServiceClient) (*pb.GetResponse, error) {
				return c.Get(ctx, &pb.GetRequest{Resource: args[0], Namespace: namespace, Name: args[1]})
			})
			if err != nil {
				return err
			}
			return printObjects(o.out, format, args[0], []*pb.Object{resp.GetObject()}, "", true, false)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the object's namespace (empty for cluster-scoped objects)")
	addOutputFlag(cmd, &format, formatTable, formatJSON, formatYAML, formatName)
	return cmd
}

func newList(o *options) *cobra.Command {
	var sel selection
	var format, minRV string
	var limit int64
	cmd := &cobra.Command{
		Use:   "list RESOURCE",
		Short: "List objects from the cache, by namespace, labels or index",
		Example: `  informerctl list pods --index node=node-1
  informerctl list configmaps -n demo -l app=web -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatYAML, formatName); err != nil {
				return err
			}
			s, err := sel.selector()
			if err != nil {
				return err
			}
			// Every page of one snapshot, all within --timeout.
			var objs []*pb.Object
			rv, err := call(cmd.Context(), o, func(ctx context.Context, c pb.CacheServiceClient) (string, error) {
				req := &pb.ListRequest{Resource: args[0], Selector: s, Limit: limit, MinResourceVersion: minRV}
				for {
					resp, err := c.List(ctx, req)
					if err != nil {
						return "", err
					}
					objs = append(objs, resp.GetObjects()...)
					if resp.GetContinueToken() == "" {
						return resp.GetResourceVersion(), nil
					}
					req.ContinueToken, req.MinResourceVersion = resp.GetContinueToken(), ""
				}
			})
			if err != nil {
				return err
			}
			return printObjects(o.out, format, args[0], objs, rv, false, sel.namespace == "")
		},
	}
	sel.addFlags(cmd)
	cmd.Flags().Int64Var(&limit, "limit", 0, "objects per page (default: the server's, 500); every page is fetched")
	cmd.Flags().StringVar(&minRV, "min-resource-version", "", "wait until the cache has reached this resourceVersion (bounded by --timeout)")
	addOutputFlag(cmd, &format, formatTable, formatJSON, formatYAML, formatName)
	return cmd
}
