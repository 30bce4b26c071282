package kubeapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"

	"k8s.io/client-go/rest"
)

// apiServer is the API server read with informerd's own credentials, for
// discovery, CRDs' printer columns and the resourceVersion of consistent
// reads: one client for the three.
type apiServer struct {
	client *http.Client
	// base is the server's URL, with the path a proxy in front of it may
	// need ("https://rancher/k8s/clusters/c-1").
	base *url.URL
}

func newAPIServer(cfg *rest.Config) (*apiServer, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: client for the API server: %w", err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: API server URL: %w", err)
	}
	return &apiServer{client: hc, base: base}, nil
}

// get sends GET p (an API path such as "/apis/apps/v1") with query and,
// when set, accept; the caller closes the response's body.
func (a *apiServer) get(ctx context.Context, p, query, accept string) (*http.Response, error) {
	var hdr http.Header
	if accept != "" {
		hdr = http.Header{"Accept": {accept}}
	}
	return a.do(ctx, p, query, hdr)
}

// do sends GET p with query and the headers in hdr that have values.
func (a *apiServer) do(ctx context.Context, p, query string, hdr http.Header) (*http.Response, error) {
	u := *a.base
	u.Path, u.RawQuery = path.Join("/", a.base.Path, p), query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return a.client.Do(req)
}
