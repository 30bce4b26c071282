package kubeproto

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The transcoder writes an object's protobuf message straight from its
// JSON, without the typed object: one pass over the JSON, the message's
// bytes written into one reused buffer, nothing allocated per field. It
// writes exactly what decoding the JSON into the typed object and calling
// its generated Marshal would (encodeMessage): the rules below are the
// generated code's, derived from each Go type's fields and protobuf tags
// (plan), and TestTranscoderAllKinds and FuzzMessageDecoders compare the
// two on every kind.
//
// It is strict where the typed path is lenient: JSON it does not read
// exactly as kube-apiserver's decoder would (a duplicate name, invalid
// UTF-8, a number that is not a plain integer where an integer goes, a
// value of the wrong JSON type, trailing data) makes it give up
// (errTranscode), and Message decodes that JSON the typed way, so the
// result or the error is the reference's. A type whose fields it has no
// rule for (an interface, a text unmarshaler, a packed field) has no plan,
// and its objects always take the typed path.

// errTranscode is the transcoder giving up: the typed path decides.
var errTranscode = errors.New("kubeproto: transcoder gives up")

// valueKind is how a field's value is read from JSON and written.
type valueKind uint8

const (
	kString  valueKind = iota // JSON string, protobuf length-delimited
	kBytes                    // JSON base64 string, protobuf length-delimited; written when not nil
	kVarint                   // JSON true/false or integer, protobuf varint
	kDouble                   // JSON number, protobuf fixed64
	kMessage                  // JSON object, protobuf embedded message (plan)
	kCustom                   // the type's own UnmarshalJSON and Marshal (custom)
	kTime                     // metav1.Time: kCustom, read without allocating
)

// field is one field of a message: where its JSON goes and how it is written.
type field struct {
	num  int
	tag  []byte // the field's key, varint of num<<3 | wire type
	kind valueKind
	// goKind is the Go kind of a kVarint field (Bool, Int32, Int64, Int,
	// Uint32, Uint64), for its range.
	goKind reflect.Kind
	ptr    bool // a pointer: written only when set
	rep    bool // a slice: each element written with its own key
	// mapped: a map with string keys, each entry an embedded message of
	// its key (field 1) and value (field 2, val).
	mapped bool
	val    *field
	msg    *plan        // kMessage
	custom reflect.Type // kCustom: the value type, whose pointer has UnmarshalJSON and Marshal
	cache  *customCache // kCustom: messages of short JSON values of custom
	// zero is what the field writes when absent (key and zero value), nil
	// when it writes nothing (a pointer, slice or map).
	zero []byte
	// elemZero is what a JSON null element of a slice or a null map value
	// writes (a zero element).
	elemZero []byte
	emit     bool // has a protobuf tag; else read and checked, not written
}

// group is a message's own fields (group 0) or an embedded struct's whose
// JSON names are inlined into the message's object (encoding/json's
// anonymous fields): parent is the group it is in, and field its field in
// that group when it is written (corev1.Volume's VolumeSource), nil when it
// is not (metav1.TypeMeta).
type group struct {
	parent int
	field  *field
	fields []*field // written fields, by number
}

// ref is where a JSON name goes.
type ref struct {
	group int
	f     *field
	idx   int // the name's ordinal in its plan, for duplicates
	// typeMeta: metav1.TypeMeta's apiVersion (1) or kind (2), which the
	// top-level object must agree with.
	typeMeta int
}

// named is a JSON name and where it goes. The name's first 16 bytes are
// kept inline (head), beside its length in the string's header, so that
// lookup tells most names apart without reading the name's own bytes,
// which live elsewhere and are mostly out of the CPU's caches in place.
type named struct {
	head [2]uint64
	name string
	ref
}

// nameHead packs s's first 16 bytes, zero-padded.
func nameHead(s string) [2]uint64 {
	var b [16]byte
	copy(b[:], s)
	return [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

// maxNames bounds a plan's JSON names, for the set of those seen in an object.
const maxNames = 256

// plan is how one Go struct type's JSON object becomes its message.
type plan struct {
	groups []group
	names  map[string]ref
	// order is the names in declaration order (ref.idx), which is the
	// order encoding/json writes them in: message looks a name up
	// there first, just after the last one it found.
	order []named
	zero  []byte // the zero value's message
	err   error  // no plan: why
}

var (
	plans   sync.Map // reflect.Type → *plan
	plansMu sync.Mutex

	jsonUnmarshaler = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	protoMarshaler  = reflect.TypeFor[interface{ Marshal() ([]byte, error) }]()
	timeType        = reflect.TypeFor[metav1.Time]()
)

// planFor returns t's plan, made once; a plan with err set means the
// transcoder does not serve t.
func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	made := map[reflect.Type]*plan{}
	p := compile(t, made)
	// A type is served only if every type it reaches is.
	for _, q := range made {
		if err := reach(q, map[*plan]bool{}); err != nil && q.err == nil {
			q.err = err
		}
	}
	for t, q := range made {
		plans.LoadOrStore(t, q)
	}
	return p
}

// reach returns the first error of a plan p reaches.
func reach(p *plan, seen map[*plan]bool) error {
	if seen[p] {
		return nil
	}
	seen[p] = true
	if p.err != nil {
		return p.err
	}
	for _, f := range p.names {
		for f := f.f; f != nil; f = f.val {
			if f.msg != nil {
				if err := reach(f.msg, seen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// compile makes t's plan, and those of the types it reaches that are not
// made yet (made holds them: types may refer to themselves).
func compile(t reflect.Type, made map[reflect.Type]*plan) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := made[t]; ok {
		return p
	}
	p := &plan{names: map[string]ref{}, groups: []group{{parent: -1}}}
	made[t] = p
	if t.Kind() != reflect.Struct {
		p.err = fmt.Errorf("%s is not a struct", t)
		return p
	}
	if isCustom(t) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		p.err = fmt.Errorf("%s decodes itself", t)
		return p
	}
	if m, ok := reflect.New(t).Interface().(interface{ Marshal() ([]byte, error) }); ok {
		zero, err := m.Marshal()
		if err != nil {
			p.err = fmt.Errorf("%s: zero value: %w", t, err)
			return p
		}
		p.zero = zero
	} else {
		p.err = fmt.Errorf("%s has no Marshal", t)
		return p
	}
	if err := p.addFields(t, 0, made); err != nil {
		p.err = err
	}
	for i := range p.groups {
		slices.SortFunc(p.groups[i].fields, func(a, b *field) int { return a.num - b.num })
		for j := 1; j < len(p.groups[i].fields); j++ {
			if p.groups[i].fields[j].num == p.groups[i].fields[j-1].num && p.err == nil {
				p.err = fmt.Errorf("%s: field number %d twice", t, p.groups[i].fields[j].num)
			}
		}
	}
	return p
}

// addFields adds struct type t's fields to group g of p.
func (p *plan) addFields(t reflect.Type, g int, made map[reflect.Type]*plan) error {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" {
			if sf.Tag.Get("protobuf") != "" {
				// Marshal writes a field JSON never sets.
				return fmt.Errorf("%s.%s: protobuf field without JSON", t, sf.Name)
			}
			continue
		}
		if opts != "" && opts != "omitempty" && opts != "inline" && opts != "omitzero" && opts != "omitempty,omitzero" && opts != "inline,omitempty" {
			return fmt.Errorf("%s.%s: json option %q", t, sf.Name, opts)
		}
		ptag := sf.Tag.Get("protobuf")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() != reflect.Struct {
				return fmt.Errorf("%s.%s: embedded %s", t, sf.Name, ft)
			}
			if isCustom(ft) {
				return fmt.Errorf("%s.%s: embedded %s has its own JSON", t, sf.Name, ft)
			}
			child := group{parent: g}
			if ptag != "" {
				f, err := newField(sf.Type, ptag, made)
				if err != nil {
					return fmt.Errorf("%s.%s: %w", t, sf.Name, err)
				}
				if f.kind != kMessage {
					return fmt.Errorf("%s.%s: embedded field is not a message", t, sf.Name)
				}
				child.field = f
				p.groups[g].fields = append(p.groups[g].fields, f)
			}
			p.groups = append(p.groups, child)
			if err := p.addFields(ft, len(p.groups)-1, made); err != nil {
				return err
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := p.names[name]; dup {
			return fmt.Errorf("%s: JSON name %q twice", t, name)
		}
		var f *field
		if ptag == "" {
			// Read and checked as the typed decoder would, never written.
			pt := "bytes,1,opt"
			switch sf.Type.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
				pt = "varint,1,opt"
			case reflect.Float64:
				pt = "fixed64,1,opt"
			}
			var err error
			if f, err = newField(sf.Type, pt, made); err != nil {
				return fmt.Errorf("%s.%s: %w", t, sf.Name, err)
			}
			f.emit = false
		} else {
			var err error
			if f, err = newField(sf.Type, ptag, made); err != nil {
				return fmt.Errorf("%s.%s: %w", t, sf.Name, err)
			}
			p.groups[g].fields = append(p.groups[g].fields, f)
		}
		r := ref{group: g, f: f}
		if t == reflect.TypeFor[metav1.TypeMeta]() {
			switch name {
			case "apiVersion":
				r.typeMeta = 1
			case "kind":
				r.typeMeta = 2
			}
		}
		r.idx = len(p.names)
		if r.idx >= maxNames {
			return fmt.Errorf("%s: more than %d JSON names", t, maxNames)
		}
		p.names[name] = r
		p.order = append(p.order, named{head: nameHead(name), name: name, ref: r})
	}
	return nil
}

// isCustom reports whether values of t decode with their own UnmarshalJSON.
func isCustom(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(jsonUnmarshaler)
}

// newField returns the field of Go type t with protobuf tag ptag.
func newField(t reflect.Type, ptag string, made map[reflect.Type]*plan) (*field, error) {
	parts := strings.Split(ptag, ",")
	if len(parts) < 3 {
		return nil, fmt.Errorf("protobuf tag %q", ptag)
	}
	num, err := strconv.Atoi(parts[1])
	if err != nil || num <= 0 {
		return nil, fmt.Errorf("protobuf tag %q", ptag)
	}
	for _, o := range parts[3:] {
		if o == "packed" {
			return nil, fmt.Errorf("packed field %q", ptag)
		}
	}
	f := &field{num: num, emit: true}
	if k := t.Kind(); (k == reflect.Slice || k == reflect.Map) && t.Name() != "" && reflect.PointerTo(t).Implements(protoMarshaler) {
		// A named slice that is its own message (metav1.Verbs).
		return nil, fmt.Errorf("%s is a message", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		f.ptr = true
		t = t.Elem()
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Pointer {
			return nil, fmt.Errorf("pointer to %s", t)
		}
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 && !isCustom(t) {
			f.rep = true
			t = t.Elem()
		}
	case reflect.Map:
		if isCustom(t) {
			break
		}
		if t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshaler) || t.Key().Implements(textUnmarshaler) {
			return nil, fmt.Errorf("map key %s", t.Key())
		}
		val, err := newField(t.Elem(), "bytes,2,opt", made)
		if err != nil {
			return nil, err
		}
		if val.ptr || val.rep || val.mapped {
			return nil, fmt.Errorf("map value %s", t.Elem())
		}
		if val.kind == kVarint {
			val, err = newField(t.Elem(), "varint,2,opt", made)
			if err != nil {
				return nil, err
			}
		} else if val.kind == kDouble {
			return nil, fmt.Errorf("map value %s", t.Elem())
		}
		f.mapped, f.val = true, val
		f.tag = appendKey(nil, num, protowire.BytesType)
		return f, nil
	}
	if (f.rep || f.ptr) && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && !isCustom(t) || t.Kind() == reflect.Map && !isCustom(t)) {
		return nil, fmt.Errorf("nested %s", t)
	}
	if f.rep && t.Kind() == reflect.Slice && !isCustom(t) {
		return nil, fmt.Errorf("repeated bytes")
	}
	wire := protowire.BytesType
	switch {
	case t == timeType:
		f.kind, f.custom = kTime, t
	case isCustom(t):
		if !reflect.PointerTo(t).Implements(protoMarshaler) {
			return nil, fmt.Errorf("%s has its own JSON and no Marshal", t)
		}
		f.kind, f.custom, f.cache = kCustom, t, customCacheOf(t)
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return nil, fmt.Errorf("%s decodes as text", t)
	default:
		switch t.Kind() {
		case reflect.String:
			f.kind = kString
		case reflect.Slice:
			f.kind = kBytes
		case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
			f.kind, f.goKind, wire = kVarint, t.Kind(), protowire.VarintType
		case reflect.Float64:
			f.kind, wire = kDouble, protowire.Fixed64Type
		case reflect.Struct:
			f.kind, f.msg = kMessage, compile(t, made)
		default:
			return nil, fmt.Errorf("field of %s", t)
		}
	}
	// The wire type is the Go kind's, as the generated code writes it:
	// tags say "bytes" for a pointer to an integer, which is a varint.
	f.tag = appendKey(nil, num, wire)
	zero, err := f.zeroValue()
	if err != nil {
		return nil, err
	}
	f.elemZero = zero
	if !f.ptr && !f.rep && f.kind != kBytes {
		f.zero = zero
	}
	return f, nil
}

// zeroValue is what a zero value of f's type writes under f's key.
func (f *field) zeroValue() ([]byte, error) {
	b := slices.Clone(f.tag)
	switch f.kind {
	case kString, kBytes:
		return append(b, 0), nil
	case kVarint:
		return append(b, 0), nil
	case kDouble:
		return append(b, 0, 0, 0, 0, 0, 0, 0, 0), nil
	case kMessage:
		if f.msg.zero == nil && f.msg.err != nil {
			return nil, nil // no plan: never used
		}
		b = binary.AppendUvarint(b, uint64(len(f.msg.zero)))
		return append(b, f.msg.zero...), nil
	}
	m, err := reflect.New(f.custom).Interface().(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(m)))
	return append(b, m...), nil
}

func appendKey(b []byte, num int, wire protowire.Type) []byte {
	return protowire.AppendTag(b, protowire.Number(num), wire)
}

// seg is the bytes one field wrote, in the transcoder's buffer.
type seg struct {
	group      int
	f          *field
	start, end int
}

// entry is one map entry written in the buffer, and its key's place in it.
type entry struct {
	start, end       int
	keyStart, keyEnd int
}

// transcoder is one transcoding's state, pooled.
type transcoder struct {
	dec     *jsontext.Decoder
	in      bytes.Buffer // the JSON, read by dec in place
	buf     []byte
	segs    []seg
	entries []entry
	scratch []byte
	// apiVersion and kind of the top-level object, as the typed
	// object's TypeMeta would hold them.
	apiVersion, kind string
}

// decoderOptions: strict JSON, invalid UTF-8 refused (the typed path
// replaces it), but duplicate names left to the transcoder, which gives up
// on those of fields and map keys and ignores those of unknown names, as
// the typed path does.
var decoderOptions = jsontext.AllowDuplicateNames(true)

var transcoders = sync.Pool{New: func() any {
	x := &transcoder{}
	x.dec = jsontext.NewDecoder(&x.in, decoderOptions)
	return x
}}

// transcode returns the protobuf message of the object of Go struct type
// t in json, and the apiVersion and kind the JSON gave it, or errTranscode.
func transcode(p *plan, json []byte) (msg []byte, apiVersion, kind string, err error) {
	x := transcoders.Get().(*transcoder)
	defer func() {
		if len(x.buf) > 1<<20 {
			x.buf = nil
		}
		x.buf, x.segs, x.entries, x.scratch = x.buf[:0], x.segs[:0], x.entries[:0], x.scratch[:0]
		x.apiVersion, x.kind = "", ""
		x.in = bytes.Buffer{}
		x.dec.Reset(&x.in, decoderOptions)
		transcoders.Put(x)
	}()
	x.in = *bytes.NewBuffer(json)
	x.dec.Reset(&x.in, decoderOptions)
	if x.dec.PeekKind() != '{' {
		return nil, "", "", errTranscode
	}
	if err := x.message(p, nil, true); err != nil {
		return nil, "", "", errTranscode
	}
	if _, err := x.dec.ReadToken(); err != io.EOF {
		return nil, "", "", errTranscode
	}
	return slices.Clone(x.buf), x.apiVersion, x.kind, nil
}

// message reads a JSON object of plan p and writes its message at the end
// of the buffer, after key and its length when key is set.
func (x *transcoder) message(p *plan, key []byte, top bool) error {
	if _, err := x.dec.ReadToken(); err != nil { // {
		return err
	}
	start, segBase := len(x.buf), len(x.segs)
	var seen [maxNames / 64]uint64
	next := 0 // where the next name is looked for in p.order
	for x.dec.PeekKind() != '}' {
		name, err := x.dec.ReadToken()
		if err != nil {
			return err
		}
		r, ok := p.lookup(name.String(), &next)
		if !ok {
			if err := x.dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		// A name twice: encoding/json keeps the last value, or merges two
		// objects; the typed path decides.
		if seen[r.idx/64]&(1<<(r.idx%64)) != 0 {
			return errTranscode
		}
		seen[r.idx/64] |= 1 << (r.idx % 64)
		at := len(x.buf)
		if top && r.typeMeta != 0 {
			if err := x.typeMeta(r.typeMeta); err != nil {
				return err
			}
			continue
		}
		if err := x.value(r.f); err != nil {
			return err
		}
		if !r.f.emit {
			x.buf = x.buf[:at]
			continue
		}
		x.segs = append(x.segs, seg{group: r.group, f: r.f, start: at, end: len(x.buf)})
	}
	if _, err := x.dec.ReadToken(); err != nil { // }
		return err
	}
	// Embedded groups, innermost first: each written group becomes a
	// field of its parent.
	segs := x.segs[segBase:]
	for g := len(p.groups) - 1; g > 0; g-- {
		gr := &p.groups[g]
		if gr.field == nil || !slices.ContainsFunc(segs, func(s seg) bool { return s.group == g }) {
			continue
		}
		at := len(x.buf)
		x.assemble(gr, g, segs)
		x.place(at, gr.field.tag, at, len(x.buf))
		x.segs = append(x.segs, seg{group: gr.parent, f: gr.field, start: at, end: len(x.buf)})
		segs = x.segs[segBase:]
	}
	at := len(x.buf)
	x.assemble(&p.groups[0], 0, segs)
	x.place(start, key, at, len(x.buf))
	x.segs = x.segs[:segBase]
	return nil
}

// lookup returns the ref of JSON name, looking in the few names of p's
// order from *next first (the API server writes fields in declaration
// order, leaving empty ones out), then in p.names; *next moves past the
// name found.
func (p *plan) lookup(name string, next *int) (ref, bool) {
	h := nameHead(name)
	for i := *next; i < len(p.order) && i < *next+lookAhead; i++ {
		o := &p.order[i]
		if len(o.name) == len(name) && o.head == h && (len(name) <= 16 || o.name[16:] == name[16:]) {
			*next = i + 1
			return o.ref, true
		}
	}
	r, ok := p.names[name]
	if ok {
		*next = r.idx + 1
	}
	return r, ok
}

// lookAhead is how many names lookup compares before the map.
const lookAhead = 6

// assemble appends group g's fields in number order: those in segs, and
// the zero values of the others.
func (x *transcoder) assemble(gr *group, g int, segs []seg) {
	// g's segments by number, as gr.fields are.
	var list [64]int32
	mine := list[:0]
	for i := range segs {
		if segs[i].group == g {
			j := len(mine)
			mine = append(mine, int32(i))
			for ; j > 0 && segs[mine[j-1]].f.num > segs[i].f.num; j-- {
				mine[j] = mine[j-1]
			}
			mine[j] = int32(i)
		}
	}
	j := 0
	for _, f := range gr.fields {
		if j < len(mine) && segs[mine[j]].f == f {
			s := segs[mine[j]]
			x.buf = append(x.buf, x.buf[s.start:s.end]...)
			j++
			continue
		}
		x.buf = append(x.buf, f.zero...)
	}
}

// place moves the bytes at from..to of the buffer to at, after key and
// their length when key is set, and ends the buffer there.
func (x *transcoder) place(at int, key []byte, from, to int) {
	var hdr [16]byte
	h := hdr[:0]
	if key != nil {
		h = append(h, key...)
		h = binary.AppendUvarint(h, uint64(to-from))
	}
	n := to - from
	need := at + len(h) + n
	if need > len(x.buf) {
		x.buf = append(x.buf, make([]byte, need-len(x.buf))...)
	}
	copy(x.buf[at+len(h):], x.buf[from:to])
	copy(x.buf[at:], h)
	x.buf = x.buf[:need]
}

// typeMeta reads the top-level object's apiVersion (which 1) or kind (2).
func (x *transcoder) typeMeta(which int) error {
	if x.dec.PeekKind() == 'n' {
		_, err := x.dec.ReadToken()
		return err
	}
	if x.dec.PeekKind() != '"' {
		return errTranscode
	}
	v, err := x.dec.ReadValue()
	if err != nil {
		return err
	}
	s, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return err
	}
	if which == 1 {
		x.apiVersion = string(s)
	} else {
		x.kind = string(s)
	}
	return nil
}

// value reads the JSON value of field f and writes it: every element of a
// slice, every entry of a map, nothing for a null pointer.
func (x *transcoder) value(f *field) error {
	k := x.dec.PeekKind()
	if k == 'n' {
		if _, err := x.dec.ReadToken(); err != nil {
			return err
		}
		if f.ptr || f.rep || f.mapped || f.kind == kBytes {
			return nil
		}
		if f.kind == kCustom {
			return x.custom(f, []byte("null"))
		}
		x.buf = append(x.buf, f.zero...)
		return nil
	}
	switch {
	case f.rep:
		if k != '[' {
			return errTranscode
		}
		if _, err := x.dec.ReadToken(); err != nil {
			return err
		}
		for x.dec.PeekKind() != ']' {
			if x.dec.PeekKind() == 'n' {
				if _, err := x.dec.ReadToken(); err != nil {
					return err
				}
				if f.kind == kCustom {
					if err := x.custom(f, []byte("null")); err != nil {
						return err
					}
					continue
				}
				x.buf = append(x.buf, f.elemZero...)
				continue
			}
			if err := x.one(f); err != nil {
				return err
			}
		}
		_, err := x.dec.ReadToken()
		return err
	case f.mapped:
		return x.mapValue(f)
	}
	return x.one(f)
}

// one reads one non-null value of f's kind and writes it under f's key.
func (x *transcoder) one(f *field) error {
	k := x.dec.PeekKind()
	switch f.kind {
	case kMessage:
		if k != '{' {
			return errTranscode
		}
		return x.message(f.msg, f.tag, false)
	case kCustom:
		v, err := x.dec.ReadValue()
		if err != nil {
			return err
		}
		return x.custom(f, v)
	case kTime:
		s, err := x.readString()
		if err != nil {
			return err
		}
		return x.time(f, s)
	case kString:
		s, err := x.readString()
		if err != nil {
			return err
		}
		x.appendField(f.tag, s)
		return nil
	case kBytes:
		s, err := x.readString()
		if err != nil {
			return err
		}
		n := base64.StdEncoding.DecodedLen(len(s))
		at := len(x.buf)
		x.buf = append(x.buf, f.tag...)
		x.buf = binary.AppendUvarint(x.buf, uint64(n))
		body := len(x.buf)
		x.buf = slices.Grow(x.buf, n)[:body+n]
		m, err := base64.StdEncoding.Decode(x.buf[body:], s)
		if err != nil {
			return errTranscode
		}
		if m != n {
			x.buf = x.buf[:body+m]
			x.place(at, f.tag, body, body+m)
		}
		return nil
	case kVarint:
		var u uint64
		if f.goKind == reflect.Bool {
			if k != 't' && k != 'f' {
				return errTranscode
			}
			t, err := x.dec.ReadToken()
			if err != nil {
				return err
			}
			if t.Bool() {
				u = 1
			}
		} else {
			if k != '0' {
				return errTranscode
			}
			v, err := x.dec.ReadValue()
			if err != nil {
				return err
			}
			n, ok := parseInt(v, f.goKind)
			if !ok {
				return errTranscode
			}
			u = n
		}
		x.buf = append(x.buf, f.tag...)
		x.buf = binary.AppendUvarint(x.buf, u)
		return nil
	case kDouble:
		if k != '0' {
			return errTranscode
		}
		v, err := x.dec.ReadValue()
		if err != nil {
			return err
		}
		d, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return errTranscode
		}
		x.buf = append(x.buf, f.tag...)
		x.buf = binary.LittleEndian.AppendUint64(x.buf, math.Float64bits(d))
		return nil
	}
	return errTranscode
}

// custom decodes raw into a new value of f's type with its UnmarshalJSON
// and writes the value's Marshal.
func (x *transcoder) custom(f *field, raw []byte) error {
	if f.custom == fieldsV1Type {
		x.fieldsV1(f, raw)
		return nil
	}
	if m, ok := f.cache.get(raw); ok {
		x.appendField(f.tag, m)
		return nil
	}
	v := reflect.New(f.custom).Interface()
	if err := v.(interface{ UnmarshalJSON([]byte) error }).UnmarshalJSON(raw); err != nil {
		return errTranscode
	}
	m, err := v.(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		return errTranscode
	}
	f.cache.put(raw, m)
	x.appendField(f.tag, m)
	return nil
}

// fieldsV1Type is metav1.FieldsV1, managedFields' field set: a JSON
// value kept as it is, the largest part of most objects' metadata.
var fieldsV1Type = reflect.TypeFor[metav1.FieldsV1]()

// fieldsV1 writes metav1.FieldsV1's message for its JSON value raw, as
// FieldsV1.UnmarshalJSON and FieldsV1.Marshal would, without their two
// copies of raw: raw's bytes as field 1, nothing for null.
func (x *transcoder) fieldsV1(f *field, raw []byte) {
	if string(raw) == "null" {
		x.appendField(f.tag, nil)
		return
	}
	x.buf = append(x.buf, f.tag...)
	x.buf = binary.AppendUvarint(x.buf, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(raw))))
	x.buf = protowire.AppendTag(x.buf, 1, protowire.BytesType)
	x.buf = protowire.AppendBytes(x.buf, raw)
}

// time writes metav1.Time's message for its JSON string's value s, as
// Time.UnmarshalJSON and Time.Marshal would: RFC 3339 in, whole seconds
// out, and nothing inside the key for the zero time.
func (x *transcoder) time(f *field, s []byte) error {
	t, err := time.Parse(time.RFC3339, unsafe.String(unsafe.SliceData(s), len(s)))
	if err != nil {
		return errTranscode
	}
	if t.IsZero() {
		x.appendField(f.tag, nil)
		return nil
	}
	// Time.ProtoTime: the seconds, and nanoseconds left 0, as its JSON
	// has none.
	var ts [24]byte
	b := append(ts[:0], 0x08)
	b = binary.AppendUvarint(b, uint64(t.Unix()))
	b = append(b, 0x10, 0)
	x.appendField(f.tag, b)
	return nil
}

// mapValue reads a JSON object into map field f: one entry message per
// name, sorted by key as the generated code sorts them.
func (x *transcoder) mapValue(f *field) error {
	if x.dec.PeekKind() != '{' {
		return errTranscode
	}
	if _, err := x.dec.ReadToken(); err != nil {
		return err
	}
	start, base := len(x.buf), len(x.entries)
	for x.dec.PeekKind() != '}' {
		name, err := x.dec.ReadValue()
		if err != nil {
			return err
		}
		at := len(x.buf)
		x.buf = append(x.buf, 0x0a)
		key, err := x.unquote(name)
		if err != nil {
			return err
		}
		x.buf = binary.AppendUvarint(x.buf, uint64(len(key)))
		x.buf = append(x.buf, key...)
		if err := x.value(f.val); err != nil {
			return err
		}
		// Placed, the entry is its key and length, then 0x0a, the map
		// key's length and the map key.
		i := at + len(f.tag) + protowire.SizeVarint(uint64(len(x.buf)-at)) + 1 + protowire.SizeVarint(uint64(len(key)))
		x.place(at, f.tag, at, len(x.buf))
		x.entries = append(x.entries, entry{start: at, end: len(x.buf), keyStart: i, keyEnd: i + len(key)})
	}
	if _, err := x.dec.ReadToken(); err != nil {
		return err
	}
	ents := x.entries[base:]
	slices.SortFunc(ents, func(a, b entry) int {
		return bytes.Compare(x.buf[a.keyStart:a.keyEnd], x.buf[b.keyStart:b.keyEnd])
	})
	for i := 1; i < len(ents); i++ {
		if bytes.Equal(x.buf[ents[i-1].keyStart:ents[i-1].keyEnd], x.buf[ents[i].keyStart:ents[i].keyEnd]) {
			return errTranscode // a key twice: encoding/json keeps the last
		}
	}
	at := len(x.buf)
	for _, e := range ents {
		x.buf = append(x.buf, x.buf[e.start:e.end]...)
	}
	x.place(start, nil, at, len(x.buf))
	x.entries = x.entries[:base]
	return nil
}

// readString reads a JSON string and returns its value (unquote).
func (x *transcoder) readString() ([]byte, error) {
	if x.dec.PeekKind() != '"' {
		return nil, errTranscode
	}
	v, err := x.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return x.unquote(v)
}

// appendField appends a length-delimited field: key, length, b.
func (x *transcoder) appendField(key, b []byte) {
	x.buf = append(x.buf, key...)
	x.buf = binary.AppendUvarint(x.buf, uint64(len(b)))
	x.buf = append(x.buf, b...)
}

// unquote returns the JSON string raw's value: raw's own bytes when it
// has no escape, else the unquoted string in scratch (valid until the next
// unquote).
func (x *transcoder) unquote(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	var err error
	x.scratch, err = jsontext.AppendUnquote(x.scratch[:0], raw)
	return x.scratch, err
}

// parseInt parses JSON number v as an integer of Go kind k, as
// encoding/json would: a plain integer in range, or not ok.
func parseInt(v []byte, k reflect.Kind) (uint64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	digits := v
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 || len(digits) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxUint64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch k {
	case reflect.Int32:
		if neg && n > 1<<31 || !neg && n > math.MaxInt32 {
			return 0, false
		}
	case reflect.Int64, reflect.Int:
		if neg && n > 1<<63 || !neg && n > math.MaxInt64 {
			return 0, false
		}
	case reflect.Uint32:
		if neg || n > math.MaxUint32 { // strconv.ParseUint refuses "-0" too
			return 0, false
		}
		return n, true
	case reflect.Uint64:
		if neg {
			return 0, false
		}
		return n, true
	default:
		return 0, false
	}
	if neg {
		return uint64(-int64(n)), true
	}
	return n, true
}

// transcodeMessage is Message by the transcoder: errTranscode when it
// gives up, and ErrKindMismatch as Message reports it.
func transcodeMessage(gvk schema.GroupVersionKind, p *plan, json []byte) ([]byte, error) {
	msg, apiVersion, kind, err := transcode(p, json)
	if err != nil {
		return nil, err
	}
	if got := schema.FromAPIVersionAndKind(apiVersion, kind); (got.Kind != "" && got.Kind != gvk.Kind) ||
		(got.Version != "" && got.GroupVersion() != gvk.GroupVersion()) {
		return nil, fmt.Errorf("%w: want %s, JSON has %s", ErrKindMismatch, gvk, got)
	}
	return msg, nil
}

// kindPlans holds each kind's plan, or nil when its objects take the typed
// path (no plan, or no protobuf encoding).
var kindPlans sync.Map // schema.GroupVersionKind → *plan

// transcoderPlan returns the plan of gvk's objects, nil when the
// transcoder does not serve them.
func transcoderPlan(gvk schema.GroupVersionKind) *plan {
	if p, ok := kindPlans.Load(gvk); ok {
		return p.(*plan)
	}
	var p *plan
	if obj, err := newMessage(gvk); err == nil {
		if q := planFor(reflect.TypeOf(obj).Elem()); q.err == nil {
			p = q
		}
	}
	kindPlans.Store(gvk, p)
	return p
}

// customCache keeps the messages of short JSON values of one custom type
// (quantities, int-or-strings), which repeat from object to object: a
// bounded map, filled until full.
type customCache struct {
	mu sync.RWMutex
	m  map[string][]byte
}

const (
	customCacheEntries = 1024
	customCacheValue   = 64 // longest JSON value kept
)

var customCaches sync.Map // reflect.Type → *customCache

func customCacheOf(t reflect.Type) *customCache {
	c, _ := customCaches.LoadOrStore(t, &customCache{m: map[string][]byte{}})
	return c.(*customCache)
}

func (c *customCache) get(raw []byte) ([]byte, bool) {
	if len(raw) > customCacheValue {
		return nil, false
	}
	c.mu.RLock()
	m, ok := c.m[string(raw)]
	c.mu.RUnlock()
	return m, ok
}

func (c *customCache) put(raw, m []byte) {
	if len(raw) > customCacheValue {
		return
	}
	c.mu.Lock()
	if len(c.m) < customCacheEntries {
		c.m[string(raw)] = m
	}
	c.mu.Unlock()
}
