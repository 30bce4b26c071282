package kubeapi

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// withCanonicalPath refuses, before any routing, a path that is not
// canonical once unescaped, with the API server's own 404 for it: a "." or
// ".." segment (or a leading "//") is its mux's plain "404 page not found",
// any other empty segment but a trailing slash its NotFound Status. Every
// later decision (is it discovery, which resource, forward or answer) is
// then made on exactly the path the forwarder sends upstream: no
// "/apis/../metrics" is taken for discovery and cleaned into another path
// afterwards.
func withCanonicalPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch pathShape(r.URL.Path) {
		case dotted:
			http.NotFound(w, r)
		case emptySegment:
			writeStatus(w, statusOf(apierrors.NewGenericServerResponse(http.StatusNotFound, r.Method, schema.GroupResource{}, "", "", 0, false)))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

type shape int

const (
	canonicalPath shape = iota
	dotted
	emptySegment
)

// pathShape classifies p, an unescaped request path.
func pathShape(p string) shape {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return dotted
	}
	rest := strings.TrimSuffix(p[1:], "/")
	empty := false
	for seg := range strings.SplitSeq(rest, "/") {
		switch seg {
		case ".", "..":
			return dotted
		case "":
			empty = empty || rest != ""
		}
	}
	if empty {
		return emptySegment
	}
	return canonicalPath
}
