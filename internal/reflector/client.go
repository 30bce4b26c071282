package reflector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/buger/jsonparser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/informerd/informerd/internal/object"
)

// Client lists and watches resources as object.Raw: the API server's JSON
// kept as bytes with its metadata scanned, where the dynamic client would
// decode every object into maps (most of a fan-out's CPU) for informerd to
// encode it again. Requests, errors, retries and watch-stream handling are
// client-go's REST client's. It is safe for concurrent use.
type Client struct {
	rest *rest.RESTClient
}

// NewClient returns a client for the API server of cfg.
func NewClient(cfg *rest.Config) (*Client, error) {
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
	return &Client{rest: rc}, nil
}

// ListWatch lists and watches gvr in namespace ("" for all namespaces or a
// cluster-scoped resource). options, when set, edits every request's
// options (selectors).
func (c *Client) ListWatch(gvr schema.GroupVersionResource, namespace string, options func(*metav1.ListOptions)) *cache.ListWatch {
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
			return c.rest.Get().AbsPath(path...).SpecificallyVersionedParams(&o, parameterCodec, versionV1).Watch(ctx)
		},
	}
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
	var typ string
	var obj []byte
	var perr error
	jsonparser.EachKey(frame, func(i int, v []byte, vt jsonparser.ValueType, err error) {
		switch {
		case err != nil:
			perr = err
		case i == 0 && vt == jsonparser.String:
			typ, perr = jsonparser.ParseString(v)
		case i == 1 && vt == jsonparser.Object:
			obj = v
		}
	}, []string{"type"}, []string{"object"})
	if perr != nil || typ == "" || obj == nil {
		return nil, nil, fmt.Errorf("decode watch event: want {\"type\":…,\"object\":{…}} on one line, got %q (%v)", head(frame), perr)
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
	frame []byte
	rest  []byte // of frame, not yet returned
}

func (r *lineReader) Read(data []byte) (int, error) {
	if len(r.rest) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
		r.rest = r.frame
	}
	n := copy(data, r.rest)
	r.rest = r.rest[n:]
	if len(r.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next reads the next non-blank line into frame.
func (r *lineReader) next() error {
	r.frame = r.frame[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.frame = append(r.frame, chunk...)
		if len(r.frame) > maxFrame {
			return fmt.Errorf("watch event larger than %d MiB", maxFrame>>20)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(r.frame)) > 0:
			return nil // the last event, without a newline
		case err != nil:
			return err
		case len(bytes.TrimSpace(r.frame)) == 0:
			r.frame = r.frame[:0]
			continue
		}
		return nil
	}
}

func (r *lineReader) Close() error { return r.src.Close() }
