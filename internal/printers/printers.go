// Package printers computes the Table columns and rows kube-apiserver v1.37.2
// serves for built-in resources (what `kubectl get` shows), from the JSON of
// the objects as the API server serves them, without importing
// k8s.io/kubernetes. The print functions are ported from
// k8s.io/kubernetes/pkg/printers/internalversion to the external types of
// k8s.io/api.
//
// kube-apiserver always prints with GenerateOptions{Wide: true}, so every
// column, whatever its priority, has a cell.
package printers

import (
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/informerd/informerd/internal/kubeproto"
)

// Printer prints the rows of one resource. It holds no mutable state: its
// methods may be called concurrently.
type Printer struct {
	columns []metav1.TableColumnDefinition
	row     func(data []byte, now time.Time) ([]any, []metav1.TableRowCondition, error)
	// list prints a whole list when a row depends on the other items or the
	// rows are sorted; nil prints each item with row, in order.
	list func(items [][]byte, now time.Time) ([]metav1.TableRow, error)
}

// For returns the printer of a built-in resource, or false when
// kube-apiserver has none: it then prints Default's columns.
func For(gr schema.GroupResource) (*Printer, bool) {
	p, ok := registry[gr]
	return p, ok
}

// Default is the printer kube-apiserver uses for a resource without one of its
// own (roles, clusterroles, limitranges, ...): Name and "Created At", the
// creation timestamp in RFC 3339, in UTC.
var Default = &Printer{
	columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	},
	row: rowOf(func(obj *metav1.PartialObjectMetadata, _ time.Time) []any {
		return []any{obj.Name, obj.CreationTimestamp.UTC().Format(time.RFC3339)}
	}),
}

// Columns returns the Table's columnDefinitions, exactly as kube-apiserver's
// (names, types, formats, descriptions, priorities). The caller must not
// modify them.
func (p *Printer) Columns() []metav1.TableColumnDefinition { return p.columns }

// Row decodes one object's JSON (as the API server serves it: apiVersion and
// kind set) and returns its row's cells and conditions as kube-apiserver
// computes them for a single object (a GET of one object or a watch event),
// with ages relative to now. Row keeps no reference to data.
func (p *Printer) Row(data []byte, now time.Time) (cells []any, conditions []metav1.TableRowCondition, err error) {
	return p.row(data, now)
}

// List returns the rows kube-apiserver prints for a list of the given items.
// They differ from one Row per item for a few resources: a StorageClass row
// names the effective default class "<name> (default)", and FlowSchemas are
// sorted by matching precedence. Each row's Object.Raw is the item it was
// printed from (the caller's slice, which List does not keep).
func (p *Printer) List(items [][]byte, now time.Time) ([]metav1.TableRow, error) {
	if p.list != nil {
		return p.list(items, now)
	}
	rows := make([]metav1.TableRow, len(items))
	for i, data := range items {
		cells, conditions, err := p.row(data, now)
		if err != nil {
			return nil, err
		}
		rows[i] = metav1.TableRow{Cells: cells, Conditions: conditions}
		rows[i].Object.Raw = data
	}
	return rows, nil
}

// ErrVersion reports an object of another version than the printer's: the
// printers are ported for the version kube-apiserver prefers (autoscaling/v2
// for horizontalpodautoscalers, not autoscaling/v1).
var ErrVersion = errors.New("printers: unsupported apiVersion")

// decode decodes an object as kube-apiserver does (field names are case
// sensitive) and checks that its apiVersion, when set, is want, when set.
func decode[T any](data []byte, want schema.GroupVersion) (*T, error) {
	obj := new(T)
	if err := kubeproto.DecodeJSON(data, obj, func() { *obj = *new(T) }); err != nil {
		return nil, fmt.Errorf("printers: decode %T: %w", obj, err)
	}
	if o, ok := any(obj).(interface{ GetObjectKind() schema.ObjectKind }); ok && !want.Empty() {
		if got := o.GetObjectKind().GroupVersionKind().GroupVersion(); !got.Empty() && got != want {
			return nil, fmt.Errorf("%w: %s, want %s", ErrVersion, got, want)
		}
	}
	return obj, nil
}

// groupVersionOf returns the group and version of a type of k8s.io/api, or
// the empty GroupVersion for another type.
func groupVersionOf[T any]() schema.GroupVersion {
	obj, ok := any(new(T)).(runtime.Object)
	if !ok {
		return schema.GroupVersion{}
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) != 1 {
		return schema.GroupVersion{}
	}
	return gvks[0].GroupVersion()
}

// rowOf adapts a print function of a typed object without row conditions.
func rowOf[T any](print func(*T, time.Time) []any) func([]byte, time.Time) ([]any, []metav1.TableRowCondition, error) {
	want := groupVersionOf[T]()
	return func(data []byte, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		obj, err := decode[T](data, want)
		if err != nil {
			return nil, nil, err
		}
		return print(obj, now), nil, nil
	}
}

// newPrinter returns the printer of a type whose rows have no conditions.
func newPrinter[T any](columns []metav1.TableColumnDefinition, print func(*T, time.Time) []any) *Printer {
	return &Printer{columns: columns, row: rowOf(print)}
}

// cloneConditions returns a copy of shared conditions, so that a caller may
// modify what Row returns.
func cloneConditions(c []metav1.TableRowCondition) []metav1.TableRowCondition {
	return slices.Clone(c)
}
