package kubeapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerd/informerd/internal/kubeproto"
	"github.com/informerd/informerd/internal/object"
	"github.com/informerd/informerd/internal/pipeline"
)

// Content types of protobuf answers, as the API server's.
const (
	contentTypeProtobuf      = runtime.ContentTypeProtobuf
	contentTypeProtobufWatch = runtime.ContentTypeProtobuf + ";stream=watch"
)

// kindOf is res's object kind.
func kindOf(res pipeline.Served) schema.GroupVersionKind {
	return res.Resolved().GVR.GroupVersion().WithKind(res.Resolved().Kind)
}

// protoMessage returns o, an object of kind, as the bare protobuf message
// out asks for (the object, or its PartialObjectMetadata), encoded once per
// object version while it is recent (forms), for every protobuf reader.
func (h *Handler) protoMessage(out *output, kind schema.GroupVersionKind, o *object.Object) ([]byte, error) {
	f, encode := formProtobuf, func(data []byte) ([]byte, error) { return kubeproto.Message(kind, data) }
	if out.as == asMetadata || out.as == asMetadataList {
		f, encode = formProtobufMetadata, kubeproto.PartialMessage
		if out.dropManagedFields {
			f, encode = formProtobufMetadataNoManagedFields, func(data []byte) ([]byte, error) {
				return kubeproto.PartialMessage(withoutManagedFields(data))
			}
		}
	} else if out.dropManagedFields {
		f, encode = formProtobufNoManagedFields, func(data []byte) ([]byte, error) {
			return kubeproto.Message(kind, withoutManagedFields(data))
		}
	}
	return h.forms.get(o, f, func(o *object.Object) ([]byte, error) {
		data, err := o.Bytes()
		if err != nil {
			return nil, err
		}
		return encode(data)
	})
}

// protoObject returns o in the envelope of one object (a get's answer, a
// watch event's object) as out asks for it, encoded once per object
// version while it is recent.
func (h *Handler) protoObject(out *output, kind schema.GroupVersionKind, o *object.Object) ([]byte, error) {
	return h.forms.get(o, out.protoObjectForm(), func(o *object.Object) ([]byte, error) {
		msg, err := h.protoMessage(out, kind, o)
		if err != nil {
			return nil, err
		}
		return kubeproto.Object(protoKind(out, kind), msg), nil
	})
}

// protoObjectForm is the form of an object's envelope out asks for.
func (out *output) protoObjectForm() form {
	var f form
	switch meta := out.as == asMetadata || out.as == asMetadataList; {
	case meta && out.metaGV.Version == "v1beta1":
		f = formProtobufMetadataBetaObject
	case meta:
		f = formProtobufMetadataObject
	default:
		f = formProtobufObject
	}
	if out.dropManagedFields {
		f++ // each form's NoManagedFields variant follows it
	}
	return f
}

// protoKind is the kind a protobuf object answer or event of a resource
// of kind is typed as.
func protoKind(out *output, kind schema.GroupVersionKind) schema.GroupVersionKind {
	if out.as == asMetadata {
		return out.metaGV.WithKind("PartialObjectMetadata")
	}
	return kind
}

// writeProtoObject answers a get in protobuf.
func (h *Handler) writeProtoObject(w http.ResponseWriter, out *output, res pipeline.Served, o *object.Object) {
	obj, err := h.protoObject(out, kindOf(res), o)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	_, _ = w.Write(obj)
}

// writeProtoList answers a list in protobuf: the items' messages, each
// encoded once per object version, framed as the typed list.
func (h *Handler) writeProtoList(w http.ResponseWriter, out *output, res pipeline.Served, objs []*object.Object, lm metav1.ListMeta) {
	items := make([][]byte, len(objs))
	for i, o := range objs {
		msg, err := h.protoMessage(out, kindOf(res), o)
		if err != nil {
			writeStatus(w, asStatus(err))
			return
		}
		items[i] = msg
	}
	listKind := kindOf(res)
	listKind.Kind += "List"
	if out.as == asMetadataList {
		listKind = out.metaGV.WithKind("PartialObjectMetadataList")
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	b := bufio.NewWriterSize(w, 64<<10)
	_, _ = kubeproto.WriteList(b, listKind, lm, items)
	_ = b.Flush()
}

// writeProtoEvent writes one protobuf watch frame of a resource of kind
// to w in two writes: a header of its own, appended to hdr (room for 32
// bytes keeps it from allocating), then o's shared envelope, or for a
// bookmark (o nil) the bookmark object's JSON encoded for this event
// alone; an object that cannot be encoded is an ERROR frame. It returns
// the bytes written.
func (h *Handler) writeProtoEvent(w io.Writer, hdr []byte, out *output, kind schema.GroupVersionKind, typ string, o *object.Object, bookmark []byte) (int, error) {
	var obj []byte
	var err error
	switch {
	case o != nil:
		obj, err = h.protoObject(out, kind, o)
	case out.as == asMetadata:
		var msg []byte
		if msg, err = kubeproto.PartialMessage(bookmark); err == nil {
			obj = kubeproto.Object(protoKind(out, kind), msg)
		}
	default:
		var msg []byte
		if msg, err = kubeproto.Message(kind, bookmark); err == nil {
			obj = kubeproto.Object(protoKind(out, kind), msg)
		}
	}
	if err != nil {
		typ, obj = "ERROR", kubeproto.Status(asStatus(err))
	}
	n, err := w.Write(kubeproto.AppendWatchFrameHeader(hdr[:0], typ, obj))
	if err != nil {
		return n, err
	}
	m, err := w.Write(obj)
	return n + m, err
}

// protobufErrors rewrites a JSON Status answer (a failure) in protobuf,
// as the API server negotiates its errors as it negotiates the answer.
type protobufErrors struct {
	http.ResponseWriter
	code   int
	status bool
	buf    bytes.Buffer
}

func (p *protobufErrors) WriteHeader(code int) {
	if p.code != 0 {
		return
	}
	p.code = code
	p.status = code >= http.StatusBadRequest && p.Header().Get("Content-Type") == "application/json"
	if !p.status {
		p.ResponseWriter.WriteHeader(code)
	}
}

func (p *protobufErrors) Write(b []byte) (int, error) {
	if p.code == 0 {
		p.WriteHeader(http.StatusOK)
	}
	if p.status {
		return p.buf.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

// finish writes a held Status in protobuf.
func (p *protobufErrors) finish() {
	if !p.status {
		return
	}
	var st metav1.Status
	if err := json.Unmarshal(p.buf.Bytes(), &st); err != nil {
		p.ResponseWriter.WriteHeader(p.code)
		_, _ = p.ResponseWriter.Write(p.buf.Bytes())
		return
	}
	p.Header().Set("Content-Type", contentTypeProtobuf)
	p.ResponseWriter.WriteHeader(p.code)
	_, _ = p.ResponseWriter.Write(kubeproto.Status(&st))
}

// Unwrap lets http.ResponseController reach the connection.
func (p *protobufErrors) Unwrap() http.ResponseWriter { return p.ResponseWriter }
