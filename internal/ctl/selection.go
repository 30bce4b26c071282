package ctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// selection holds the flags that choose objects, as kubectl's.
type selection struct {
	namespace     string
	allNamespaces bool
	labels        string
	index         string
}

func (s *selection) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&s.namespace, "namespace", "n", "", "only this namespace (default: all namespaces)")
	f.BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, "every namespace (the default when -n is not given)")
	f.StringVarP(&s.labels, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&s.index, "index", "", "index selector NAME=VALUE[,VALUE...], e.g. node=node-1 (informerctl resources lists the indexes)")
}

// selector checks the flags and returns the selector they make.
func (s *selection) selector() (*pb.Selector, error) {
	if s.namespace != "" && s.allNamespaces {
		return nil, errors.New("-n and -A (--all-namespaces) exclude each other")
	}
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

// narrowed says whether anything but the namespace narrows the selection.
func (s *selection) narrowed() bool { return s.labels != "" || s.index != "" }

// clientOptions are the options of a pkg/client ListWatch of resource that
// selects what sel does.
func clientOptions(resource string, sel *pb.Selector) client.Options {
	return client.Options{
		Resource:      resource,
		Namespace:     sel.GetNamespace(),
		LabelSelector: sel.GetLabelSelector(),
		Index:         sel.GetIndex().GetName(),
		IndexValues:   sel.GetIndex().GetValues(),
	}
}
