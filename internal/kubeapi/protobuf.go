package kubeapi

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// protoMessage returns o's bare protobuf message as out asks for it (the
// object, or its PartialObjectMetadata), encoded once per object version
// while it is recent (forms), for every protobuf reader.
func (h *Handler) protoMessage(out *output, res pipeline.Served, o *object.Object) ([]byte, error) {
	f, encode := formProtobuf, func(o *object.Object) ([]byte, error) { return kubeproto.Message(kindOf(res), o.JSON) }
	if out.as == asMetadata || out.as == asMetadataList {
		f, encode = formProtobufMetadata, func(o *object.Object) ([]byte, error) { return kubeproto.PartialMessage(o.JSON) }
		if out.dropManagedFields {
			f, encode = formProtobufMetadataNoManagedFields, func(o *object.Object) ([]byte, error) {
				return kubeproto.PartialMessage(withoutManagedFields(o.JSON))
			}
		}
	} else if out.dropManagedFields {
		f, encode = formProtobufNoManagedFields, func(o *object.Object) ([]byte, error) {
			return kubeproto.Message(kindOf(res), withoutManagedFields(o.JSON))
		}
	}
	return h.forms.get(o, f, encode)
}

// protoKind is the kind a protobuf object answer or event is typed as.
func protoKind(out *output, res pipeline.Served) schema.GroupVersionKind {
	if out.as == asMetadata {
		return out.metaGV.WithKind("PartialObjectMetadata")
	}
	return kindOf(res)
}

// writeProtoObject answers a get in protobuf.
func (h *Handler) writeProtoObject(w http.ResponseWriter, out *output, res pipeline.Served, o *object.Object) {
	msg, err := h.protoMessage(out, res, o)
	if err != nil {
		writeStatus(w, asStatus(err))
		return
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	_, _ = w.Write(kubeproto.Object(protoKind(out, res), msg))
}

// writeProtoList answers a list in protobuf: the items' messages, each
// encoded once per object version, framed as the typed list.
func (h *Handler) writeProtoList(w http.ResponseWriter, out *output, res pipeline.Served, objs []*object.Object, lm metav1.ListMeta) {
	items := make([][]byte, len(objs))
	for i, o := range objs {
		msg, err := h.protoMessage(out, res, o)
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

// protoEvent is one watch event's frame: obj the event's object, or for
// a bookmark (object nil) the bookmark object's JSON.
func (h *Handler) protoEvent(out *output, res pipeline.Served, typ string, o *object.Object, bookmark []byte) []byte {
	var msg []byte
	var err error
	if o != nil {
		msg, err = h.protoMessage(out, res, o)
	} else if out.as == asMetadata {
		msg, err = kubeproto.PartialMessage(bookmark)
	} else {
		msg, err = kubeproto.Message(kindOf(res), bookmark)
	}
	if err != nil {
		return kubeproto.WatchFrame("ERROR", kubeproto.Status(asStatus(err)))
	}
	return kubeproto.WatchFrame(typ, kubeproto.Object(protoKind(out, res), msg))
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
