package kubeapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"github.com/informerd/informerd/internal/printers"
)

// printerColumns are a resource's Table columns: for a built-in resource
// kube-apiserver's printer (internal/printers, ported from its v1.37.2
// printers), for a custom resource its CRD's additionalPrinterColumns for
// one version, read from the API server with informerd's credentials and
// kept for a TTL.
type printerColumns struct {
	api *apiServer
	ttl time.Duration

	mu   sync.Mutex
	byGV map[schema.GroupVersionResource]*columns
}

// columns is one resource's printer columns: a built-in printer, or a
// CRD's columns with their parsed JSONPaths.
type columns struct {
	printer *printers.Printer
	fetched time.Time
	// selectable are the CRD's selectableFields' JSONPaths.
	selectable []string
	defs       []apiextensionsv1.CustomResourceColumnDefinition
	paths      []*jsonpath.JSONPath
}

func newPrinterColumns(api *apiServer, ttl time.Duration) *printerColumns {
	return &printerColumns{api: api, ttl: ttl, byGV: map[schema.GroupVersionResource]*columns{}}
}

// get returns gvr's columns: a built-in resource's printer (the API
// server's default printer, Name and Created At, for a built-in resource
// without one of its own); a CRD's columns, none when the CRD cannot be
// read (the table then has NAME and AGE only).
func (p *printerColumns) get(ctx context.Context, gvr schema.GroupVersionResource) *columns {
	if pr, ok := printers.For(gvr.GroupResource()); ok {
		return &columns{printer: pr}
	}
	if gvr.Group == "" || !strings.Contains(gvr.Group, ".") || strings.HasSuffix(gvr.Group, ".k8s.io") {
		return &columns{printer: printers.Default} // built-in groups have no CRD
	}
	p.mu.Lock()
	c, ok := p.byGV[gvr]
	p.mu.Unlock()
	if ok && time.Since(c.fetched) < p.ttl {
		return c
	}
	c = p.fetch(ctx, gvr)
	p.mu.Lock()
	p.byGV[gvr] = c // bounded: only cached resources are asked for
	p.mu.Unlock()
	return c
}

func (p *printerColumns) fetch(ctx context.Context, gvr schema.GroupVersionResource) *columns {
	c := &columns{fetched: time.Now()}
	resp, err := p.api.get(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+gvr.Resource+"."+gvr.Group, "", "")
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&crd); err != nil {
		return c
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != gvr.Version {
			continue
		}
		for _, f := range v.SelectableFields {
			c.selectable = append(c.selectable, f.JSONPath)
		}
		for _, col := range v.AdditionalPrinterColumns {
			jp := jsonpath.New(col.Name).AllowMissingKeys(true)
			if jp.Parse("{"+col.JSONPath+"}") != nil {
				continue
			}
			c.defs, c.paths = append(c.defs, col), append(c.paths, jp)
		}
	}
	return c
}

// definitions are the table's columns: Name, then the CRD's, or Age when
// it has none (as kube-apiserver prints a CRD without columns).
func (c *columns) definitions() []metav1.TableColumnDefinition {
	if c.printer != nil {
		return c.printer.Columns()
	}
	if len(c.defs) == 0 {
		return tableColumns
	}
	out := []metav1.TableColumnDefinition{tableColumns[0]}
	for _, d := range c.defs {
		out = append(out, metav1.TableColumnDefinition{Name: d.Name, Type: d.Type, Format: d.Format, Description: d.Description, Priority: d.Priority})
	}
	return out
}

// cells evaluates the CRD's columns on obj (decoded JSON), formatting dates
// as ages, as kube-apiserver does.
func (c *columns) cells(obj map[string]any, now time.Time) []any {
	out := make([]any, 0, len(c.defs))
	for i, d := range c.defs {
		results, err := c.paths[i].FindResults(obj)
		if err != nil || len(results) == 0 || len(results[0]) == 0 {
			out = append(out, nil)
			continue
		}
		v := results[0][0].Interface()
		if d.Type == "date" {
			if s, ok := v.(string); ok {
				if t, err := time.Parse(time.RFC3339, s); err == nil {
					v = duration.HumanDuration(now.Sub(t))
				}
			}
		}
		out = append(out, v)
	}
	return out
}
