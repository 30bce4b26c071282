package object

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/buger/jsonparser"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/util/jsonpath"
)

// pathIndex evaluates one JSONPath index expression on an object's JSON.
// A plain chain of fields ({.spec.nodeName}) is read straight from the
// bytes. Any other expression is run by client-go's JSONPath on the object
// decoded as unstructured decodes it (integers as int64), but only the
// top-level fields it starts from ({.status.conditions[?(@.type=="Ready")]}
// decodes .status); an expression that does not start from named fields
// decodes the whole object.
type pathIndex struct {
	name, expr string
	// fields is the chain of a plain field path; nil otherwise.
	fields []string
	// roots are the top-level fields the expression reads; nil means all.
	roots []string
}

func newPathIndex(name, expr string) (*pathIndex, error) {
	p, err := jsonpath.Parse(name, expr)
	if err != nil {
		return nil, fmt.Errorf("index %q: jsonpath %q: %w", name, expr, err)
	}
	// Parse once more through the evaluator, which is stricter.
	if err := jsonpath.New(name).Parse(expr); err != nil {
		return nil, fmt.Errorf("index %q: jsonpath %q: %w", name, expr, err)
	}
	ix := &pathIndex{name: name, expr: expr}
	ix.fields = plainFields(p.Root)
	ix.roots = rootFields(p.Root)
	return ix, nil
}

// plainFields returns the field chain of {.a.b.c}, or nil.
func plainFields(root *jsonpath.ListNode) []string {
	if len(root.Nodes) != 1 {
		return nil
	}
	list, ok := root.Nodes[0].(*jsonpath.ListNode)
	if !ok || len(list.Nodes) == 0 {
		return nil
	}
	var out []string
	for _, n := range list.Nodes {
		f, ok := n.(*jsonpath.FieldNode)
		if !ok || f.Value == "" {
			return nil
		}
		out = append(out, f.Value)
	}
	return out
}

// rootFields returns the top-level fields every part of the expression
// starts from, or nil when one does not start from a named field.
func rootFields(root *jsonpath.ListNode) []string {
	var out []string
	for _, n := range root.Nodes {
		switch n := n.(type) {
		case *jsonpath.TextNode:
			// Literal text reads nothing.
		case *jsonpath.ListNode:
			if len(n.Nodes) == 0 {
				return nil
			}
			f, ok := n.Nodes[0].(*jsonpath.FieldNode)
			if !ok || f.Value == "" {
				return nil
			}
			out = append(out, f.Value)
		default:
			return nil
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// values returns the expression's scalar values in data, sorted and
// without duplicates.
func (ix *pathIndex) values(data []byte) ([]string, error) {
	if ix.fields != nil {
		v, typ, _, err := jsonparser.Get(data, ix.fields...)
		if err == jsonparser.KeyPathNotFoundError {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if typ == jsonparser.String {
			// Interned by Encode too; interned here, it is not copied first.
			s, err := internString(v)
			if err != nil {
				return nil, nil
			}
			return []string{s}, nil
		}
		if s, ok := scalarJSON(v, typ); ok {
			return []string{s}, nil
		}
		return nil, nil
	}
	doc, err := ix.decode(data)
	if err != nil {
		return nil, err
	}
	return findValues(ix.name, ix.expr, doc)
}

// findValues runs expr on a decoded object. It parses expr each time:
// client-go's JSONPath changes its parsed template while it runs a {range}
// and does not restore it.
func findValues(name, expr string, doc any) ([]string, error) {
	jp := jsonpath.New(name).AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return nil, err
	}
	results, err := jp.FindResults(doc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rs := range results {
		for _, v := range rs {
			if s, ok := scalar(v); ok {
				out = append(out, s)
			}
		}
	}
	return dedupe(out), nil
}

// decode decodes the fields the expression reads.
func (ix *pathIndex) decode(data []byte) (map[string]any, error) {
	doc := map[string]any{}
	if ix.roots == nil {
		return doc, utiljson.Unmarshal(data, &doc)
	}
	for _, f := range ix.roots {
		raw, typ, _, err := jsonparser.Get(data, f)
		if err == jsonparser.KeyPathNotFoundError {
			continue
		}
		if err != nil {
			return nil, err
		}
		if typ == jsonparser.String {
			// jsonparser gives a string's contents, without quotes.
			if doc[f], err = parseString(raw); err != nil {
				return nil, err
			}
			continue
		}
		var v any
		if err := utiljson.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		doc[f] = v
	}
	return doc, nil
}

// scalarJSON renders a JSON scalar as scalar renders the decoded value:
// strings unquoted, integers in decimal, other numbers as Go prints a
// float64, booleans as true or false. Objects, arrays and nulls are not
// values one can select by.
func scalarJSON(v []byte, typ jsonparser.ValueType) (string, bool) {
	switch typ {
	case jsonparser.String:
		s, err := parseString(v)
		return s, err == nil
	case jsonparser.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return strconv.FormatInt(n, 10), true
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return "", false
		}
		return fmt.Sprint(f), true
	case jsonparser.Boolean:
		return string(v), true
	}
	return "", false
}

// scalar renders a JSONPath result as an index value; maps, lists and nulls
// are not values one can select by, so they are skipped.
func scalar(v reflect.Value) (string, bool) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), true
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32, reflect.Uint64:
		return fmt.Sprint(v.Interface()), true
	default:
		return "", false
	}
}

func dedupe(vs []string) []string {
	if len(vs) < 2 {
		return vs
	}
	sort.Strings(vs)
	out := vs[:1]
	for _, v := range vs[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
