package kubeapi

import (
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/informerd/informerd/internal/auth"
)

// Audit annotations of an authorization decision, as the API server's
// WithAuthorization writes them.
const (
	decisionAnnotation = "authorization.k8s.io/decision"
	reasonAnnotation   = "authorization.k8s.io/reason"
)

// withAuthorization lets a cached read through only when the caller in the
// request's context (the impersonated user, if impersonation was allowed)
// may do it: verb, group, version, resource, namespace, name, and the
// label and field selectors as the API server passes them to its
// authorizers (KEP-4601). A refusal is the API server's 403, worded as its
// own. Discovery needs no permission beyond authentication, as the
// system:discovery ClusterRole grants it to every authenticated user.
func (h *Handler) withAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := factsOf(r)
		if f.kind != kindCached {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		u, _ := request.UserFrom(ctx)
		a := attributes(f)
		err := h.opts.Authorizer.Authorize(authContext(r), u, a)
		if err == nil {
			audit.AddAuditAnnotations(ctx, decisionAnnotation, "allow", reasonAnnotation, "")
			next.ServeHTTP(w, r)
			return
		}
		var e *auth.Error
		if !errors.As(err, &e) || e.Kind != auth.Forbidden {
			audit.AddAuditAnnotation(ctx, reasonAnnotation, "internal error")
			writeStatus(w, authStatus(err))
			return
		}
		audit.AddAuditAnnotations(ctx, decisionAnnotation, "forbid", reasonAnnotation, e.Reason)
		responsewriters.Forbidden(record(u, f, a), w, r, e.Reason, codecs)
	})
}

// attributes are what a cached read asks for, in package auth's terms.
func attributes(f *facts) auth.Attributes {
	gvr := f.res.Resolved().GVR
	a := auth.Attributes{
		Verb: f.info.Verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
		Configured: f.res.Configured(), Namespace: f.info.Namespace, Name: f.info.Name,
	}
	// A selector that does not parse reaches no authorizer, as at the API
	// server (GetAuthorizerAttributes); the read itself is then refused
	// with a 400.
	if s, err := fields.ParseSelector(f.info.FieldSelector); err == nil && !s.Empty() {
		a.FieldSelector = s.Requirements()
	}
	if s, err := labels.Parse(f.info.LabelSelector); err == nil && !s.Empty() {
		a.LabelSelector, _ = s.Requirements()
	}
	return a
}

// record is a in the API server's form, for its 403 message.
func record(u user.Info, f *facts, a auth.Attributes) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: u, Verb: a.Verb, Namespace: a.Namespace, APIGroup: a.Group, APIVersion: a.Version,
		Resource: a.Resource, Name: a.Name, ResourceRequest: true, Path: f.info.Path,
		FieldSelectorRequirements: a.FieldSelector, LabelSelectorRequirements: a.LabelSelector,
	}
}
