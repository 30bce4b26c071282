package reflector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/buger/jsonparser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/informerd/informerd/internal/object"
)

// Client lists and watches resources as object.Raw: the API server's JSON
// kept as bytes with its metadata scanned, where the dynamic client would
// decode every object into maps (most of a fan-out's CPU) for informerd to
// encode it again. Requests, errors, retries and watch-stream handling are
// client-go's REST client's. It is safe for concurrent use.
type Client struct {
	rest *rest.RESTClient
	// watches sends watch requests; see ClientOptions.WatchHTTP2.
	watches *http.Client
}

// ClientOptions tune a Client.
type ClientOptions struct {
	// WatchHTTP2 sends watches over the HTTP/2 connection lists share,
	// as client-go does. By default each watch has an HTTP/1.1
	// connection of its own over TLS, read in the goroutine that decodes
	// it: no HTTP/2 read loop hands each event over, and no flow-control
	// WINDOW_UPDATE is written back per event, which is 20–40% of the CPU
	// of reading an event (BenchmarkReadOnly in internal/reflector/ingest).
	// A connection idle for streamIdle is closed and the watch reopened.
	WatchHTTP2 bool
}

// NewClient returns a client for the API server of cfg.
func NewClient(cfg *rest.Config, opts ...ClientOptions) (*Client, error) {
	var o ClientOptions
	for _, opt := range opts {
		o = opt
	}
	c := rest.CopyConfig(cfg)
	c.ContentConfig = rest.ContentConfig{
		AcceptContentTypes:   "application/json",
		ContentType:          "application/json",
		NegotiatedSerializer: rawSerializer{},
	}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	wc := rest.CopyConfig(c)
	wc.Timeout = 0 // a watch lasts as long as the API server keeps it open
	if !o.WatchHTTP2 {
		wc.NextProtos = []string{"http/1.1"}
	}
	watches, err := rest.HTTPClientFor(wc)
	if err != nil {
		return nil, fmt.Errorf("API server client for watches: %w", err)
	}
	return &Client{rest: rc, watches: watches}, nil
}

// ListWatch lists and watches gvr in namespace ("" for all namespaces or a
// cluster-scoped resource). options, when set, edits every request's
// options (selectors). prepare, when set, readies each watched object
// while the bytes it was read from are valid (object.Encoder.Prepare).
func (c *Client) ListWatch(gvr schema.GroupVersionResource, namespace string, options func(*metav1.ListOptions), prepare func(*object.Raw)) *cache.ListWatch {
	path := resourcePath(gvr, namespace)
	edit := func(o *metav1.ListOptions) {
		if options != nil {
			options(o)
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			edit(&o)
			result := c.rest.Get().AbsPath(path...).SpecificallyVersionedParams(&o, parameterCodec, versionV1).Do(ctx)
			if err := result.Error(); err != nil {
				return nil, err
			}
			body, err := result.Raw()
			if err != nil {
				return nil, err
			}
			return object.ParseRawList(body)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			edit(&o)
			o.Watch = true
			return c.watch(ctx, gvr.GroupResource(), prepare, c.rest.Get().AbsPath(path...).SpecificallyVersionedParams(&o, parameterCodec, versionV1))
		},
	}
}

// watch sends the watch request req and returns a streamWatch reading its
// response. As client-go's Request.Watch, it returns an empty watch when
// the connection failed with EOF or a timeout (the Reflector watches again
// from its resourceVersion), and the API server's status as the error of
// any other answer than 200.
func (c *Client) watch(ctx context.Context, gr schema.GroupResource, prepare func(*object.Raw), req *rest.Request) (watch.Interface, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL().String(), nil)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.watches.Do(hr)
	// client-go's request metrics, as its own watches record them: the
	// result, and the latency until the response headers.
	code := "<error>"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	clientmetrics.RequestResult.Increment(ctx, code, http.MethodGet, hr.URL.Host)
	clientmetrics.RequestLatency.Observe(ctx, http.MethodGet, *hr.URL, time.Since(start))
	if err != nil {
		if utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err) {
			return watch.NewEmptyWatch(), nil
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, watchError(resp, gr)
	}
	return newStreamWatch(ctx, resp.Body, prepare), nil
}

// resourcePath is the URL path of a resource's collection, as the dynamic
// client builds it.
func resourcePath(gvr schema.GroupVersionResource, namespace string) []string {
	var p []string
	if gvr.Group == "" {
		p = []string{"/api", gvr.Version}
	} else {
		p = []string{"/apis", gvr.Group, gvr.Version}
	}
	if namespace != "" {
		p = append(p, "namespaces", namespace)
	}
	return append(p, gvr.Resource)
}

// Query parameters are encoded as the dynamic client encodes them.
var (
	versionV1       = schema.GroupVersion{Version: "v1"}
	parameterScheme = runtime.NewScheme()
	parameterCodec  = runtime.NewParameterCodec(parameterScheme)
)

func init() { metav1.AddToGroupVersion(parameterScheme, versionV1) }

// rawSerializer negotiates JSON only: objects decode into object.Raw,
// lists into object.RawList, errors into metav1.Status; watch streams are
// framed a line per event.
type rawSerializer struct{}

func (rawSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        "application/json",
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       rawCodec{},
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: eventCodec{}, Framer: lineFramer{}},
	}}
}

func (rawSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (rawSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

var errNoEncode = errors.New("informerd's API server client only reads: it encodes no objects")

// rawCodec decodes response bodies and watch events' objects.
type rawCodec struct{}

func (rawCodec) Identifier() runtime.Identifier { return "informerd-raw-json" }

func (rawCodec) Encode(runtime.Object, io.Writer) error { return errNoEncode }

// Decode decodes data into into when it is a *metav1.Status or an
// *object.RawList; otherwise it returns a *metav1.Status for an object of
// kind Status and an *object.Raw holding data (not a copy) for anything
// else.
func (rawCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case *metav1.Status:
		if err := json.Unmarshal(data, into); err != nil {
			return nil, nil, fmt.Errorf("decode status: %w", err)
		}
		return into, nil, nil
	case *object.RawList:
		l, err := object.ParseRawList(data)
		if err != nil {
			return nil, nil, err
		}
		*into = *l
		return into, nil, nil
	}
	if kind, err := jsonparser.GetString(data, "kind"); err == nil && kind == "Status" {
		s := &metav1.Status{}
		if err := json.Unmarshal(data, s); err != nil {
			return nil, nil, fmt.Errorf("decode status: %w", err)
		}
		return s, nil, nil
	}
	r, err := object.ParseRaw(data)
	if err != nil {
		return nil, nil, err
	}
	gvk := r.GroupVersionKind()
	return r, &gvk, nil
}

// eventCodec decodes a watch event's envelope, {"type":…,"object":…},
// into a metav1.WatchEvent whose object is a copy of its raw bytes; client-go
// then decodes the object with rawCodec.
type eventCodec struct{}

func (eventCodec) Identifier() runtime.Identifier { return "informerd-raw-json-event" }

func (eventCodec) Encode(runtime.Object, io.Writer) error { return errNoEncode }

func (eventCodec) Decode(frame []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("decode watch event into %T: only *metav1.WatchEvent is supported", into)
	}
	typ, obj, err := splitEvent(frame)
	if err != nil {
		return nil, nil, err
	}
	ev.Type = typ
	ev.Object = runtime.RawExtension{Raw: slices.Clone(obj)}
	return ev, nil, nil
}

func head(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// maxFrame bounds one watch event (etcd stores at most 1.5 MiB per object;
// JSON may be larger than its stored form).
const maxFrame = 64 << 20

// lineFramer frames a JSON watch stream by lines: kube-apiserver writes each
// event as one line of compact JSON (a JSON encoder's output, in which a
// newline can only end a value). It scans for newlines instead of parsing
// the JSON to find where each event ends.
type lineFramer struct{}

func (lineFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &lineReader{src: r, br: bufio.NewReaderSize(r, 64<<10)}
}

func (lineFramer) NewFrameWriter(w io.Writer) io.Writer { return w }

// lineReader returns one event per Read, or as much as fits with
// io.ErrShortBuffer and the rest on the next Reads: the contract of
// apimachinery's frame readers.
type lineReader struct {
	src   io.ReadCloser
	br    *bufio.Reader
	frame []byte // a line longer than br's buffer
	rest  []byte // of the line, not yet returned
}

func (r *lineReader) Read(data []byte) (int, error) {
	if len(r.rest) == 0 {
		line, err := r.nextLine()
		if err != nil {
			return 0, err
		}
		r.rest = line
	}
	n := copy(data, r.rest)
	r.rest = r.rest[n:]
	if len(r.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// nextLine returns the next non-blank line, valid until the next call: a
// line that fits the reader's buffer is returned from it without a copy.
func (r *lineReader) nextLine() ([]byte, error) {
	r.frame = r.frame[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if err == nil && len(r.frame) == 0 {
			if len(bytes.TrimSpace(chunk)) == 0 {
				continue
			}
			return chunk, nil
		}
		r.frame = append(r.frame, chunk...)
		if len(r.frame) > maxFrame {
			return nil, fmt.Errorf("watch event larger than %d MiB", maxFrame>>20)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(r.frame)) > 0:
			return r.frame, nil // the last event, without a newline
		case err != nil:
			return nil, err
		case len(bytes.TrimSpace(r.frame)) == 0:
			r.frame = r.frame[:0]
			continue
		}
		return r.frame, nil
	}
}

func (r *lineReader) Close() error { return r.src.Close() }
