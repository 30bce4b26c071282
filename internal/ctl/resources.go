package ctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// resource is how -o json and -o yaml print a ResourceInfo.
type resource struct {
	Name            string   `json:"name"`
	Group           string   `json:"group"`
	Version         string   `json:"version"`
	Kind            string   `json:"kind"`
	Namespaced      bool     `json:"namespaced"`
	Indexes         []string `json:"indexes"`
	Synced          bool     `json:"synced"`
	ResourceVersion string   `json:"resourceVersion"`
	Objects         uint64   `json:"objects"`
}

func newResources(o *options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "resources",
		Short: "List the served resources: kind, indexes, synced, resourceVersion, object count",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, formatTable, formatJSON, formatYAML, formatName); err != nil {
				return err
			}
			conn, c, err := o.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			served, err := listResources(cmd.Context(), o, c)
			if err != nil {
				return err
			}
			var rs []resource
			for _, r := range served {
				rs = append(rs, resource{Name: r.GetName(), Group: r.GetGroup(), Version: r.GetVersion(), Kind: r.GetKind(), Namespaced: r.GetNamespaced(),
					Indexes: r.GetIndexes(), Synced: r.GetSynced(), ResourceVersion: r.GetResourceVersion(), Objects: r.GetObjectCount()})
			}
			switch format {
			case formatJSON, formatYAML:
				return writeData(o.out, format, map[string]any{"resources": rs})
			case formatName:
				for _, r := range rs {
					fmt.Fprintln(o.out, r.Name)
				}
				return nil
			}
			tw := tabwriter.NewWriter(o.out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tAPIVERSION\tNAMESPACED\tSYNCED\tRESOURCEVERSION\tOBJECTS\tINDEXES")
			for _, r := range rs {
				apiVersion := r.Version
				if r.Group != "" {
					apiVersion = r.Group + "/" + r.Version
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\t%s\t%d\t%s\n", r.Name, r.Kind, apiVersion, r.Namespaced, r.Synced, r.ResourceVersion, r.Objects, strings.Join(r.Indexes, ","))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &format, formatTable, formatJSON, formatYAML, formatName)
	return cmd
}

// servedAs finds the resource informerd serves under name, as kubectl
// resolves a resource type: by the name ListResources gives it, or by a
// name it may be configured by (plural alone, or plural.version.group).
func servedAs(ctx context.Context, o *options, c pb.CacheServiceClient, name string) (*pb.ResourceInfo, error) {
	served, err := listResources(ctx, o, c)
	if err != nil {
		return nil, err
	}
	return match(served, name)
}

func listResources(ctx context.Context, o *options, c pb.CacheServiceClient) ([]*pb.ResourceInfo, error) {
	var resp *pb.ListResourcesResponse
	err := o.unary(ctx, func(ctx context.Context) (err error) {
		resp, err = c.ListResources(ctx, &pb.ListResourcesRequest{})
		return err
	})
	return resp.GetResources(), err
}

// match is servedAs's choice among the served resources.
func match(resources []*pb.ResourceInfo, name string) (*pb.ResourceInfo, error) {
	full, gr := schema.ParseResourceArg(name)
	var found, byPlural []*pb.ResourceInfo
	var served []string
	for _, r := range resources {
		served = append(served, r.GetName())
		plural := r.GetName()
		if r.GetGroup() != "" {
			plural = strings.TrimSuffix(plural, "."+r.GetGroup())
		}
		gvr := schema.GroupVersionResource{Group: r.GetGroup(), Version: r.GetVersion(), Resource: plural}
		switch {
		case r.GetName() == name, full != nil && *full == gvr:
			found = append(found, r)
		case gr.Group == "" && gr.Resource == plural:
			byPlural = append(byPlural, r)
		}
	}
	if len(found) == 0 {
		found = byPlural
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Errorf("not found: informerd serves no resource %q; served: %s (`informerctl resources` lists them)", name, strings.Join(served, ", "))
	case len(found) > 1:
		var names []string
		for _, r := range found {
			names = append(names, r.GetName())
		}
		return nil, fmt.Errorf("%q is ambiguous: informerd serves %s; name one of them", name, strings.Join(names, " and "))
	case found[0].GetKind() == "":
		return nil, fmt.Errorf("not ready: %s has not been found in the API server's discovery yet (`informerctl status` shows why)", name)
	}
	return found[0], nil
}
