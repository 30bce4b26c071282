package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
)

// Output formats, as kubectl's -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
)

func addOutputFlag(cmd *cobra.Command, p *string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", formatTable, "output format: "+strings.Join(formats, ", "))
}

func checkFormat(format string, allowed ...string) error {
	if !slices.Contains(allowed, format) {
		return fmt.Errorf("unknown output format %q: use one of %s", format, strings.Join(allowed, ", "))
	}
	return nil
}

// writeData prints v as indented JSON or as YAML.
func writeData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if format == formatYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// kubeList is a list of objects as kubectl prints one.
type kubeList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]string `json:"metadata"`
	Items      []json.RawMessage `json:"items"`
}

// meta is what the table shows of an object.
type meta struct {
	Metadata struct {
		CreationTimestamp time.Time `json:"creationTimestamp"`
	} `json:"metadata"`
}

func age(o *pb.Object, now time.Time) string {
	var m meta
	if err := json.Unmarshal(o.GetJson(), &m); err != nil || m.Metadata.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(m.Metadata.CreationTimestamp))
}

// printObjects prints the objects of a get or list.
func printObjects(w io.Writer, format, resource string, objs []*pb.Object, rv string, single, namespaceColumn bool) error {
	switch format {
	case formatJSON, formatYAML:
		if single {
			return writeData(w, format, json.RawMessage(objs[0].GetJson()))
		}
		l := kubeList{APIVersion: "v1", Kind: "List", Metadata: map[string]string{"resourceVersion": rv}, Items: []json.RawMessage{}}
		for _, o := range objs {
			l.Items = append(l.Items, o.GetJson())
		}
		return writeData(w, format, l)
	case formatName:
		for _, o := range objs {
			fmt.Fprintf(w, "%s/%s\n", resource, o.GetName())
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if namespaceColumn {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tRESOURCEVERSION\tAGE")
	now := time.Now()
	for _, o := range objs {
		if namespaceColumn {
			fmt.Fprintf(tw, "%s\t", o.GetNamespace())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.GetName(), o.GetResourceVersion(), age(o, now))
	}
	return tw.Flush()
}
