package ctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
			resp, err := call(cmd.Context(), o, func(ctx context.Context, c pb.CacheServiceClient) (*pb.ListResourcesResponse, error) {
				return c.ListResources(ctx, &pb.ListResourcesRequest{})
			})
			if err != nil {
				return err
			}
			var rs []resource
			for _, r := range resp.GetResources() {
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
