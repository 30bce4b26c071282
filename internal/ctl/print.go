package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
)

// objectFormats are the -o values of get, list and watch.
var objectFormats = []string{formatTable, formatWide, formatJSON, formatYAML, formatName}

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

// meta is what the tables show of an object besides its name.
type meta struct {
	Metadata struct {
		CreationTimestamp time.Time         `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
	} `json:"metadata"`
}

func metaOf(o *pb.Object) (meta, bool) {
	var m meta
	err := json.Unmarshal(o.GetJson(), &m)
	return m, err == nil
}

func age(o *pb.Object, now time.Time) string {
	m, ok := metaOf(o)
	if !ok || m.Metadata.CreationTimestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(m.Metadata.CreationTimestamp))
}

// labels is the LABELS column of -o wide, as kubectl's --show-labels.
func labels(o *pb.Object) string {
	m, _ := metaOf(o)
	if len(m.Metadata.Labels) == 0 {
		return "<none>"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m.Metadata.Labels)) {
		kv = append(kv, k+"="+m.Metadata.Labels[k])
	}
	return strings.Join(kv, ",")
}

// printObjects prints the objects of a get (single) or a list.
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
	wide := format == formatWide
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if namespaceColumn {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tRESOURCEVERSION\tAGE")
	if wide {
		fmt.Fprint(tw, "\tLABELS")
	}
	fmt.Fprintln(tw)
	now := time.Now()
	for _, o := range objs {
		if namespaceColumn {
			fmt.Fprintf(tw, "%s\t", o.GetNamespace())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s", o.GetName(), o.GetResourceVersion(), age(o, now))
		if wide {
			fmt.Fprintf(tw, "\t%s", labels(o))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// watchEvent is how -o json and -o yaml print an event.
type watchEvent struct {
	Type            string          `json:"type"`
	ResourceVersion string          `json:"resourceVersion"`
	Object          json.RawMessage `json:"object,omitempty"`
}

// eventPrinter prints the events of a watch, one at a time as they come:
// the tables have fixed columns instead of aligned ones.
type eventPrinter struct {
	w        io.Writer
	format   string
	resource string
}

// The rows of the event tables: EVENT, NAMESPACE, NAME, RESOURCEVERSION,
// and LABELS for -o wide.
const (
	eventRow     = "%-10s %-20s %-40s %s\n"
	wideEventRow = "%-10s %-20s %-40s %-16s %s\n"
)

// header prints the table's header, if the format has one.
func (p eventPrinter) header() {
	switch p.format {
	case formatTable:
		fmt.Fprintf(p.w, eventRow, "EVENT", "NAMESPACE", "NAME", "RESOURCEVERSION")
	case formatWide:
		fmt.Fprintf(p.w, wideEventRow, "EVENT", "NAMESPACE", "NAME", "RESOURCEVERSION", "LABELS")
	}
}

// print prints one event: typ is ADDED, MODIFIED or DELETED; rv is the
// resourceVersion to resume after it.
func (p eventPrinter) print(typ, rv string, o *pb.Object) error {
	switch p.format {
	case formatJSON, formatYAML:
		b, err := json.Marshal(watchEvent{Type: typ, ResourceVersion: rv, Object: o.GetJson()})
		if err != nil {
			return err
		}
		if p.format == formatJSON {
			_, err = fmt.Fprintf(p.w, "%s\n", b)
			return err
		}
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "---\n%s", b)
		return err
	case formatName:
		_, err := fmt.Fprintf(p.w, "%s/%s\n", p.resource, o.GetName())
		return err
	case formatWide:
		_, err := fmt.Fprintf(p.w, wideEventRow, typ, o.GetNamespace(), o.GetName(), rv, labels(o))
		return err
	}
	_, err := fmt.Fprintf(p.w, eventRow, typ, o.GetNamespace(), o.GetName(), rv)
	return err
}
