package kubeapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/buger/jsonparser"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
	"github.com/informerd/informerd/internal/printers"
)

// tableOptions is a request for server-side printing (kubectl get's
// default output): Accept application/json;as=Table;g=meta.k8s.io.
type tableOptions struct {
	// include is the includeObject parameter: None, Metadata (default) or
	// Object.
	include metav1.IncludeObjectPolicy
	// err is the API server's 400 for an includeObject it does not know.
	err error
}

// tableOptionsOf reads a Table request's options (the includeObject
// parameter) as the API server's optionsForTransform does.
func tableOptionsOf(r *http.Request) tableOptions {
	t := tableOptions{include: metav1.IncludeMetadata}
	o := &metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
	if errs := metav1validation.ValidateTableOptions(o); len(errs) > 0 {
		t.err = apierrors.NewBadRequest("Unable to convert to Table as requested: " + errs[0].Error())
	}
	if o.IncludeObject != "" {
		t.include = o.IncludeObject
	}
	return t
}

// Table columns: what kube-apiserver prints for a custom resource without
// printer columns of its own (a CRD without additionalPrinterColumns; a
// CRD's own columns follow Name). Built-in types get the API server's
// printers (internal/printers).
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

func oneObject(o *object.Object) []*object.Object { return []*object.Object{o} }

// writeTable writes objs as a Table with the list's metadata lm (for a get,
// the object's resourceVersion, as the API server's table convertor sets).
func (h *Handler) writeTable(w http.ResponseWriter, r *http.Request, t tableOptions, res pipeline.Served, objs []*object.Object, lm metav1.ListMeta) {
	if err := readable(objs); err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.tableJSON(h.columns.get(r.Context(), res.Resolved().GVR), t, objs, lm, true, h.now()))
}

// tableJSON encodes objs as a meta.k8s.io/v1 Table with cols, each row's
// object (its metadata by default) embedded from the cached JSON, ages
// printed at now; without headers, with no columnDefinitions (a watch's
// events after its first).
func (h *Handler) tableJSON(cols *columns, t tableOptions, objs []*object.Object, lm metav1.ListMeta, headers bool, now time.Time) []byte {
	rows := h.tableRows(cols, objs, now)
	for i := range rows {
		data := rows[i].Object.Raw
		rows[i].Object.Raw = nil
		switch t.include {
		case metav1.IncludeObject:
			rows[i].Object.Raw = data
		case metav1.IncludeMetadata:
			rows[i].Object.Raw, _ = partialObjectMetadata(data, "meta.k8s.io/v1")
		}
	}
	table := metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta: lm,
		Rows:     rows,
	}
	if headers {
		table.ColumnDefinitions = cols.definitions()
	}
	b, err := json.Marshal(&table)
	if err != nil {
		return []byte(`{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[],"rows":[]}`)
	}
	return b
}

// tableRows prints objs' rows with cols, each row's Object the object's
// cached JSON: a built-in printer's (which may order a list's rows, as
// the API server's), else Name and the CRD's columns, or Name and Age.
// Every cold object of objs has passed readable.
func (h *Handler) tableRows(cols *columns, objs []*object.Object, now time.Time) []metav1.TableRow {
	if cols.printer != nil {
		items := make([][]byte, len(objs))
		for i, o := range objs {
			items[i] = cachedJSON(o)
		}
		rows, err := cols.printer.List(items, now)
		if err == nil {
			return rows
		}
		h.opts.Log.Warn("the API server's printer cannot print an object; printing Name and Created At", "err", err)
		if rows, err = printers.Default.List(items, now); err == nil {
			return rows
		}
	}
	rows := make([]metav1.TableRow, 0, len(objs))
	for _, o := range objs {
		row := metav1.TableRow{Cells: []any{o.Name}}
		if len(cols.defs) > 0 {
			var obj map[string]any
			_ = json.Unmarshal(cachedJSON(o), &obj)
			row.Cells = append(row.Cells, cols.cells(obj, now)...)
		} else {
			age := "<unknown>"
			if ts, err := jsonparser.GetString(cachedJSON(o), "metadata", "creationTimestamp"); err == nil {
				if created, err := time.Parse(time.RFC3339, ts); err == nil {
					age = duration.HumanDuration(now.Sub(created))
				}
			}
			row.Cells = append(row.Cells, age)
		}
		row.Object.Raw = cachedJSON(o)
		rows = append(rows, row)
	}
	return rows
}
