package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// answer is what must agree between the API server and informerd in the
// answer to one request: the normalized form of a response, which keeps
// what a client relies on and drops what legitimately differs (uids,
// timestamps, audit ids, continue tokens' bytes, the resourceVersions in
// messages).
type answer struct {
	Code        int
	ContentType string
	// ContentEncoding is gzip when the body came compressed.
	ContentEncoding string `json:",omitempty"`
	// Indented: the body is pretty-printed.
	Indented bool `json:",omitempty"`
	// NotJSON: the body is neither JSON nor YAML (protobuf, text).
	NotJSON bool         `json:",omitempty"`
	Status  *statusFacts `json:",omitempty"`
	Body    *bodyFacts   `json:",omitempty"`
	Events  []eventFacts `json:",omitempty"`
	// End is how a watch's reading ended: "" at the case's last write (or
	// an ERROR event), "closed" when the server ended the stream first,
	// "timeout" when nothing more came.
	End string `json:",omitempty"`
}

// statusFacts is a Status: its code, reason, message (numbers of three
// digits or more masked: they are resourceVersions), details, and whether
// it carries a continue token (a 410 for an expired continue does).
type statusFacts struct {
	// Kind is "Status", or empty when the Status has no type.
	Kind        string
	Code        int32
	Reason      metav1.StatusReason
	Message     string
	Name        string               `json:",omitempty"`
	Group       string               `json:",omitempty"`
	DetailsKind string               `json:",omitempty"`
	Causes      []metav1.StatusCause `json:",omitempty"`
	Retry       int32                `json:",omitempty"`
	Continue    bool                 `json:",omitempty"`
}

// bodyFacts is an object, list or Table: its kind, its top-level and
// metadata keys, the object's identity or the list's items, the list's
// remainingItemCount.
type bodyFacts struct {
	Kind, APIVersion string
	Keys             []string
	MetaKeys         []string
	// Namespace, Name and ResourceVersion identify one object; a list's
	// resourceVersion is only compared as present (MetaKeys).
	Namespace, Name, ResourceVersion string      `json:",omitempty"`
	Items                            []itemFacts `json:",omitempty"`
	RemainingItemCount               *int64      `json:",omitempty"`
	// ShardInfo is a sharded list's shardInfo.selector.
	ShardInfo string      `json:",omitempty"`
	Table     *tableFacts `json:",omitempty"`
}

// itemFacts is one item of a list.
type itemFacts struct {
	Namespace, Name, ResourceVersion string
	Keys, MetaKeys                   []string
}

// tableFacts is a Table: whether it defines columns, their names, and
// its rows' cells and objects.
type tableFacts struct {
	ColumnDefinitions bool
	Columns           []string `json:",omitempty"`
	Rows              []rowFacts
}

type rowFacts struct {
	// Cells are the row's cells as text, an Age cell masked.
	Cells                            []string `json:",omitempty"`
	Namespace, Name, ResourceVersion string
	ObjectKind                       string   `json:",omitempty"`
	ObjectKeys                       []string `json:",omitempty"`
}

// eventFacts is one watch event: its type, its object's identity and
// keys, a Table's rows, an ERROR's Status, and whether a BOOKMARK ends
// the initial events. Other bookmarks are dropped: when they come is
// each server's own.
type eventFacts struct {
	Type                             string
	Namespace, Name, ResourceVersion string
	Keys                             []string `json:",omitempty"`
	InitialEventsEnd                 bool     `json:",omitempty"`
	// NotBeforeEvents: the initial events' bookmark is at or after every
	// event before it. Its resourceVersion itself is each server's
	// current one, which other resources' writes move.
	NotBeforeEvents bool         `json:",omitempty"`
	Status          *statusFacts `json:",omitempty"`
	Table           *tableFacts  `json:",omitempty"`
}

// longNumber is a number in a message that is a resourceVersion, which
// each server words with its own current one.
var longNumber = regexp.MustCompile(`[0-9]{3,}`)

func maskNumbers(s string) string { return longNumber.ReplaceAllString(s, "N") }

// readAnswer reads a whole response that is not a watch stream, and
// returns it with the continue token of a list.
func readAnswer(resp *http.Response) (answer, string, error) {
	defer resp.Body.Close()
	a := answer{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), ContentEncoding: resp.Header.Get("Content-Encoding")}
	body, err := io.ReadAll(decoded(resp))
	if err != nil {
		return a, "", fmt.Errorf("read the body: %w", err)
	}
	a.Indented = bytes.HasPrefix(body, []byte("{\n"))
	m, ok := decodeBody(a.ContentType, body)
	if !ok {
		a.NotJSON = len(body) > 0
		return a, "", nil
	}
	if isStatus(m) {
		a.Status = statusOf(m)
		return a, "", nil
	}
	a.Body = bodyOf(m)
	return a, str(metaOf(m)["continue"]), nil
}

// decoded is resp's body, decompressed when it came gzipped (the client
// asked for gzip itself, so its transport leaves it compressed). The
// gzip stream is opened at the first read: a watch's first bytes may be
// a while coming.
func decoded(resp *http.Response) io.Reader {
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return resp.Body
	}
	return &gunzip{r: resp.Body}
}

type gunzip struct {
	r   io.Reader
	z   *gzip.Reader
	err error
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.z == nil && g.err == nil {
		g.z, g.err = gzip.NewReader(g.r)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.z.Read(p)
}

// decodeBody decodes a JSON or YAML body into a map.
func decodeBody(contentType string, body []byte) (map[string]any, bool) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/yaml" {
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, false
		}
		body = j
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, false
	}
	return m, true
}

func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	if m == nil {
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func str(v any) string { s, _ := v.(string); return s }

func metaOf(m map[string]any) map[string]any {
	md, _ := m["metadata"].(map[string]any)
	return md
}

// isStatus reports whether m is a Status: its kind says so, or it has
// none and a Status's members (the API server's timeout filter writes one
// without its type).
func isStatus(m map[string]any) bool {
	if kind, ok := m["kind"]; ok {
		return kind == "Status"
	}
	_, code := m["code"]
	_, status := m["status"]
	return code && status
}

func statusOf(m map[string]any) *statusFacts {
	data, _ := json.Marshal(m)
	var s metav1.Status
	_ = json.Unmarshal(data, &s)
	f := &statusFacts{Kind: s.Kind, Code: s.Code, Reason: s.Reason, Message: maskNumbers(s.Message), Continue: s.Continue != ""}
	if d := s.Details; d != nil {
		f.Name, f.Group, f.DetailsKind, f.Retry = d.Name, d.Group, d.Kind, d.RetryAfterSeconds
		for _, c := range d.Causes {
			c.Message = maskNumbers(c.Message)
			f.Causes = append(f.Causes, c)
		}
	}
	return f
}

func bodyOf(m map[string]any) *bodyFacts {
	md := metaOf(m)
	f := &bodyFacts{Kind: str(m["kind"]), APIVersion: str(m["apiVersion"]), Keys: keysOf(m), MetaKeys: keysOf(md)}
	if si, ok := md["shardInfo"].(map[string]any); ok {
		f.ShardInfo = str(si["selector"])
	}
	items, isList := m["items"].([]any)
	switch {
	case f.Kind == "Table":
		f.Table = tableOf(m, nil)
	case isList || strings.HasSuffix(f.Kind, "List"):
		for _, it := range items {
			o, _ := it.(map[string]any)
			imd := metaOf(o)
			f.Items = append(f.Items, itemFacts{
				Namespace: str(imd["namespace"]), Name: str(imd["name"]), ResourceVersion: str(imd["resourceVersion"]),
				Keys: keysOf(o), MetaKeys: keysOf(imd),
			})
		}
		if n, ok := md["remainingItemCount"].(json.Number); ok {
			v, _ := n.Int64()
			f.RemainingItemCount = &v
		}
	default:
		f.Namespace, f.Name, f.ResourceVersion = str(md["namespace"]), str(md["name"]), str(md["resourceVersion"])
	}
	return f
}

// tableOf normalizes a Table. columns, when not nil, carries a watch's
// column names from its first Table, which alone defines them, to the
// rows of the events after it, whose Age cells are masked too.
func tableOf(m map[string]any, columns *[]string) *tableFacts {
	defs, _ := m["columnDefinitions"].([]any)
	f := &tableFacts{ColumnDefinitions: len(defs) > 0, Rows: []rowFacts{}}
	var names []string
	for _, d := range defs {
		dm, _ := d.(map[string]any)
		f.Columns = append(f.Columns, str(dm["name"]))
		names = append(names, str(dm["name"]))
	}
	switch {
	case columns == nil:
	case len(defs) > 0:
		*columns = names
	default:
		names = *columns
	}
	rows, _ := m["rows"].([]any)
	for _, r := range rows {
		rm, _ := r.(map[string]any)
		o, _ := rm["object"].(map[string]any)
		omd := metaOf(o)
		row := rowFacts{
			Namespace: str(omd["namespace"]), Name: str(omd["name"]), ResourceVersion: str(omd["resourceVersion"]),
			ObjectKind: str(o["kind"]), ObjectKeys: keysOf(o),
		}
		cells, _ := rm["cells"].([]any)
		for i, c := range cells {
			if i < len(names) && names[i] == "Age" {
				c = "age" // each server's clock and moment
			}
			row.Cells = append(row.Cells, fmt.Sprint(c))
		}
		f.Rows = append(f.Rows, row)
	}
	return f
}

// eventOf normalizes one watch event; keep is false for a bookmark that
// does not end the initial events. columns are the stream's Table
// columns so far (tableOf).
func eventOf(raw json.RawMessage, columns *[]string) (ev eventFacts, keep bool) {
	var e struct {
		Type   string
		Object map[string]any
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&e); err != nil {
		return eventFacts{Type: "UNDECODABLE"}, true
	}
	ev.Type = e.Type
	md := metaOf(e.Object)
	switch {
	case e.Type == "ERROR" || isStatus(e.Object):
		ev.Status = statusOf(e.Object)
		return ev, true
	case e.Type == "BOOKMARK":
		ann, _ := md["annotations"].(map[string]any)
		if ann[metav1.InitialEventsAnnotationKey] != "true" {
			return ev, false
		}
		ev.InitialEventsEnd, ev.ResourceVersion = true, str(md["resourceVersion"])
		return ev, true
	case str(e.Object["kind"]) == "Table":
		ev.Table = tableOf(e.Object, columns)
		if len(ev.Table.Rows) > 0 {
			r := ev.Table.Rows[0]
			ev.Namespace, ev.Name, ev.ResourceVersion = r.Namespace, r.Name, r.ResourceVersion
		}
		return ev, true
	}
	ev.Namespace, ev.Name, ev.ResourceVersion = str(md["namespace"]), str(md["name"]), str(md["resourceVersion"])
	ev.Keys = keysOf(e.Object)
	return ev, true
}

// streamEvents decodes a watch stream's events into the returned channel,
// which is closed when the stream ends or ctx does.
func streamEvents(ctx context.Context, body io.Reader) <-chan eventFacts {
	out := make(chan eventFacts, 1000)
	go func() {
		defer close(out)
		d := json.NewDecoder(body)
		var seen uint64 // the highest resourceVersion of an event so far
		var columns []string
		for {
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return
			}
			ev, keep := eventOf(raw, &columns)
			if !keep {
				continue
			}
			rv, _ := strconv.ParseUint(ev.ResourceVersion, 10, 64)
			if ev.InitialEventsEnd {
				ev.NotBeforeEvents, ev.ResourceVersion = rv >= seen, ""
			}
			seen = max(seen, rv)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
