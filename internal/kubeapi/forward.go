package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/rest"
)

// newForwarder returns the handler of every request informerd does not
// answer itself: writes, subresources, uncached resources, exec, logs and
// port-forward upgrades. It forwards them to the API server unchanged with
// the caller's own bearer token and never with informerd's credentials:
// informerd grants nothing the caller did not have.
func newForwarder(cfg *rest.Config, maxBody int64, obs Observer, log *slog.Logger) (http.Handler, error) {
	// The API server's address and CA, without informerd's token or
	// client certificate.
	anon := rest.AnonymousClientConfig(cfg)
	rt, err := rest.TransportFor(anon)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: transport to the API server: %w", err)
	}
	target, _, err := rest.DefaultServerUrlFor(anon)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: API server URL: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			forwardedFor(pr)
		},
		Transport: endWithAnswer{rt},
		// Watches, logs and exec stream: send each write at once.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			obs.Forwarded(resp.StatusCode)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			obs.Forwarded(0)
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeStatus(w, statusRequestTooLarge(tooLarge.Limit))
				return
			}
			log.Warn("cannot forward a request to the API server", "method", r.Method, "path", r.URL.Path, "err", err)
			st := unavailable(fmt.Sprintf("informerd could not forward this request to the API server at %s: %v", target.Host, err))
			writeStatus(w, st)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && factsOf(r).kind != kindPublic {
			writeStatus(w, cannotForward(r))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		proxy.ServeHTTP(w, r)
	}), nil
}

// forwardedFor appends the caller's address to the X-Forwarded-For the
// caller sent, so that the API server's audit log (sourceIPs) shows the
// caller and not only informerd. A caller on a Unix socket has no address;
// its header is passed on as it is.
func forwardedFor(pr *httputil.ProxyRequest) {
	prior := pr.In.Header.Values("X-Forwarded-For")
	pr.Out.Header.Del("X-Forwarded-For")
	host, _, err := net.SplitHostPort(pr.In.RemoteAddr)
	if err == nil && host != "" {
		prior = append(prior, host)
	}
	if len(prior) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(prior, ", "))
	}
}

// endWithAnswer ends a forwarded request once its answer has been relayed,
// even when the caller never sends the rest of its body. The API server may
// answer before reading the body (a 403 from authorization, say), and an
// HTTP/2 client that sees a status above 299 stops sending it
// (golang.org/x/net/http2, so client-go). The HTTP/2 transport to the API
// server is then still reading the caller's body for a request already
// answered, and closing the answer's body waits for that read, or for the
// request's context to end (golang/go#48908): the caller waits for the end
// of the answer, the forwarder for the caller's body, and both wait forever.
// Ending the request's context when the answer's body is closed (after
// ReverseProxy has copied it) breaks that wait.
type endWithAnswer struct{ next http.RoundTripper }

func (t endWithAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Header.Get("Upgrade") != "" {
		// No body to wait for; or a connection upgrade (exec,
		// port-forward), whose answer's body ReverseProxy uses as the
		// connection, which the request's own context ends.
		return t.next.RoundTrip(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose is an answer's body whose Close ends its request's context
// first, so that the transport's Close does not wait for the request's body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// cannotForward explains why a request without a bearer token is not
// forwarded: informerd only passes the caller's own token on.
func cannotForward(r *http.Request) *metav1.Status {
	what := fmt.Sprintf("%s %s", r.Method, r.URL.Path)
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return &metav1.Status{
			Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: fmt.Sprintf("informerd does not serve %s from its cache, and cannot forward it to the API server with a client certificate: it forwards only the caller's own bearer token. Send a token (a ServiceAccount token, or `kubectl create token`) with this request, or send it to the API server directly", what),
		}
	}
	return &metav1.Status{
		Code: http.StatusUnauthorized, Reason: metav1.StatusReasonUnauthorized,
		Message: fmt.Sprintf("informerd does not serve %s from its cache, and forwards such requests to the API server only with the caller's own bearer token; this request has none. Put a token in your kubeconfig (users[].user.token or tokenFile), or send it to the API server directly", what),
	}
}
