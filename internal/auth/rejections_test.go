package auth

import (
	"context"
	"errors"
	"io"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

type answer struct{ err error }

func (a answer) AuthenticateToken(context.Context, string) (*authenticator.Response, bool, error) {
	return nil, false, a.err
}

// TestRejections: an answer of the TokenReview becomes "not authenticated"
// (which the cache keeps); a review that could not be made stays an error
// (which it does not keep, and which callers see as UNAVAILABLE).
func TestRejections(t *testing.T) {
	gr := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"rejected with a reason", errors.New("[invalid bearer token, service account token has expired]"), false},
		{"429 from API priority and fairness", apierrors.NewTooManyRequests("slow down", 1), true},
		{"503 during a rollout", apierrors.NewServiceUnavailable("shutting down"), true},
		{"500", apierrors.NewInternalError(errors.New("boom")), true},
		{"informerd may not create tokenreviews", apierrors.NewForbidden(gr, "", errors.New("no RBAC")), true},
		{"connection refused", &url.Error{Op: "Post", URL: "https://10.0.0.1/apis", Err: errors.New("dial tcp: connection refused")}, true},
		{"connection closed", io.ErrUnexpectedEOF, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := rejections{answer{tc.err}}.AuthenticateToken(context.Background(), "t")
			if ok || (err != nil) != tc.wantErr {
				t.Errorf("got ok=%v err=%v, want an error: %v", ok, err, tc.wantErr)
			}
		})
	}
}
