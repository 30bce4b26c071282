package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/buger/jsonparser"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
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

// tableRequested reports whether r asks for a Table, as kubectl get does.
func tableRequested(r *http.Request) (tableOptions, bool) {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		params := strings.Split(part, ";")
		if strings.TrimSpace(params[0]) != "application/json" {
			continue
		}
		var as, g string
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch k {
			case "as":
				as = v
			case "g":
				g = v
			}
		}
		if as == "Table" && g == metav1.GroupName {
			t := tableOptions{include: metav1.IncludeMetadata}
			o := &metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
			if errs := metav1validation.ValidateTableOptions(o); len(errs) > 0 {
				t.err = apierrors.NewBadRequest("Unable to convert to Table as requested: " + errs[0].Error())
			}
			if o.IncludeObject != "" {
				t.include = o.IncludeObject
			}
			return t, true
		}
		if as == "" {
			return tableOptions{}, false // plain JSON is preferred
		}
	}
	return tableOptions{}, false
}

// Table columns: what kube-apiserver prints for a resource without
// printer columns of its own (a CRD without additionalPrinterColumns; a
// CRD's own columns follow Name). Built-in types get these two too, not the
// API server's type-specific columns (kubectl get pods shows NAME and AGE,
// not READY or STATUS).
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

func oneObject(o *object.Object) []*object.Object { return []*object.Object{o} }

// writeTable writes objs as a Table with the list's metadata lm (for a get,
// the object's resourceVersion, as the API server's table convertor sets).
func (h *Handler) writeTable(w http.ResponseWriter, r *http.Request, t tableOptions, res pipeline.Served, objs []*object.Object, lm metav1.ListMeta) {
	if t.err != nil {
		writeStatus(w, asStatus(t.err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.tableJSON(h.columns.get(r.Context(), res.Resolved().GVR), t, objs, lm, true))
}

// tableJSON encodes objs as a meta.k8s.io/v1 Table with cols, each row's
// object (its metadata by default) embedded from the cached JSON; without
// headers, with no columnDefinitions (a watch's events after its first).
func (h *Handler) tableJSON(cols *columns, t tableOptions, objs []*object.Object, lm metav1.ListMeta, headers bool) []byte {
	now := time.Now()
	rows := make([]metav1.TableRow, 0, len(objs))
	for _, o := range objs {
		row := metav1.TableRow{Cells: []any{o.Name}}
		if len(cols.defs) > 0 {
			var obj map[string]any
			_ = json.Unmarshal(o.JSON, &obj)
			row.Cells = append(row.Cells, cols.cells(obj, now)...)
		} else {
			age := "<unknown>"
			if ts, err := jsonparser.GetString(o.JSON, "metadata", "creationTimestamp"); err == nil {
				if created, err := time.Parse(time.RFC3339, ts); err == nil {
					age = duration.HumanDuration(now.Sub(created))
				}
			}
			row.Cells = append(row.Cells, age)
		}
		switch t.include {
		case metav1.IncludeObject:
			row.Object.Raw = o.JSON
		case metav1.IncludeMetadata:
			meta, _, _, err := jsonparser.Get(o.JSON, "metadata")
			if err == nil {
				var b bytes.Buffer
				fmt.Fprintf(&b, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":%s}`, meta)
				row.Object.Raw = b.Bytes()
			}
		}
		rows = append(rows, row)
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
