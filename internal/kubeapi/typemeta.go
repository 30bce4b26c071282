package kubeapi

import (
	"bufio"
	"bytes"

	"github.com/buger/jsonparser"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/informerd/informerd/internal/pipeline"
)

// builtin reports whether r is a type the API server encodes from Go
// structs (a built-in type of client-go's scheme), whose list items carry
// no kind and apiVersion; a custom resource's items (unstructured) keep
// theirs.
func builtin(r pipeline.Resolved) bool {
	return clientgoscheme.Scheme.Recognizes(schema.GroupVersionKind{Group: r.GVR.Group, Version: r.GVR.Version, Kind: r.Kind})
}

// writeWithoutTypeMeta writes obj, a JSON object, without its "kind" and
// "apiVersion" members. The cache holds them first (as the API server
// writes them, or as informerd adds them to a list's items), so the common
// case is a slice of obj; any other layout is rewritten.
func writeWithoutTypeMeta(b *bufio.Writer, obj []byte) {
	rest, ok := skipTypeMeta(obj)
	if !ok {
		rest = jsonparser.Delete(jsonparser.Delete(bytes.Clone(obj), "kind"), "apiVersion")
		_, _ = b.Write(rest)
		return
	}
	_ = b.WriteByte('{')
	_, _ = b.Write(rest)
}

// skipTypeMeta returns what follows the leading "kind" and "apiVersion"
// members of obj, `{"kind":"Pod","apiVersion":"v1",REST`, in either order,
// or false when obj does not start so.
func skipTypeMeta(obj []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(obj, []byte("{"))
	if !ok {
		return nil, false
	}
	seen := 0
	for seen < 2 {
		var key []byte
		switch {
		case bytes.HasPrefix(rest, []byte(`"kind":"`)):
			key = []byte(`"kind":"`)
		case bytes.HasPrefix(rest, []byte(`"apiVersion":"`)):
			key = []byte(`"apiVersion":"`)
		default:
			return nil, false
		}
		rest = rest[len(key):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 || end+1 >= len(rest) || rest[end+1] != ',' {
			return nil, false
		}
		rest = rest[end+2:]
		seen++
	}
	return rest, true
}
