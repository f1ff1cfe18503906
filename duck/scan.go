package duck

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// ErrTooDeep is wrapped by the error of a scan or decode that met JSON
// nested deeper than its limit.
var ErrTooDeep = errors.New("JSON nested too deep")

// MaxDepth is the nesting Decode accepts, the limit of encoding/json and of
// the kube-apiserver's decoder.
const MaxDepth = 10000

// ObjectStats describes a workload's JSON as Scan measured it, before any of
// it is decoded. Counts are of the pod template the workload's Shape finds.
type ObjectStats struct {
	// Depth is the deepest nesting of objects and arrays; the object itself
	// is at depth 1.
	Depth int
	// Containers, InitContainers and EphemeralContainers are the lengths of
	// those lists of the pod spec.
	Containers, InitContainers, EphemeralContainers int
	// Volumes is the length of the pod spec's volumes.
	Volumes int
	// MaxEnv is the longest env or envFrom list of any one container.
	MaxEnv int
	// MaxVolumeMounts is the longest volumeMounts list of any one container.
	MaxVolumeMounts int
	// DecodedBytes estimates, from above, the heap that Decode allocates for
	// the object: the Go values of the fields WithPod knows, with room for
	// slices grown while decoding. Fields WithPod does not know cost nothing.
	DecodedBytes int64
}

// Scan reads a workload's JSON without decoding it and returns its
// ObjectStats. It allocates nothing per field, so an object that would
// decode into far more memory than its size (a "bomb" of empty containers,
// say) can be measured, and refused, cheaply. It fails as Decode would on
// JSON that is malformed, nested deeper than maxDepth (wrapping ErrTooDeep),
// not an object, or holds a field WithPod knows twice, and on a path to the
// pod template that runs through something other than an object. A missing
// template is not an error for Scan.
func (s Shape) Scan(raw []byte, maxDepth int) (ObjectStats, error) {
	if err := s.validate(); err != nil {
		return ObjectStats{}, err
	}
	res, err := s.scan(raw, maxDepth)
	return res.stats, err
}

// scanResult is what a scan learned: the stats and where the template is.
type scanResult struct {
	stats    ObjectStats
	template []byte // the template's JSON; nil when absent or null
}

func (s Shape) scan(raw []byte, maxDepth int) (scanResult, error) {
	if maxDepth <= 0 || maxDepth > MaxDepth {
		maxDepth = MaxDepth
	}
	sc := scanner{data: raw, maxDepth: maxDepth}
	root := s.scanRoot()
	sc.skipSpace()
	if sc.pos >= len(raw) {
		return scanResult{}, errors.New("empty JSON: want an object")
	}
	if c := raw[sc.pos]; c != '{' {
		return scanResult{}, fmt.Errorf("JSON is %s, not an object", kindOf(c))
	}
	cost, err := sc.value(root)
	if err != nil {
		return scanResult{}, err
	}
	sc.skipSpace()
	if sc.pos < len(raw) {
		return scanResult{}, sc.syntax("invalid character %q after the object", raw[sc.pos])
	}
	sc.stats.DecodedBytes = cost + root.size
	return scanResult{stats: sc.stats, template: sc.template}, nil
}

// kindOf names the JSON type that starts with c, for errors.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	}
	return fmt.Sprintf("invalid (%q)", c)
}

// The scanner follows the Go type the JSON will be decoded into, as a tree
// of tnodes computed once from reflection. It charges every value what
// encoding/json would allocate for it: a pointer's target, a slice's
// backing array (twice, for growth), a map's entries, a string's bytes.
type tkind uint8

const (
	tSkip   tkind = iota // a Go type the estimate ignores
	tStruct              // fields by JSON name
	tSlice
	tBytes // []byte, a base64 string
	tMap
	tString
	tScalar // bool or number, stored in place
	tOpaque // its own UnmarshalJSON (Quantity, Time, IntOrString, FieldsV1): charged its JSON's length
)

type tnode struct {
	kind    tkind
	size    int64 // bytes of one Go value of the type
	fields  map[string]*tfield
	elem    *tnode // of a slice or map
	elemPtr bool   // a slice of pointers
}

// counter says which ObjectStats field a list's length goes to.
type counter uint8

const (
	countNone counter = iota
	countContainers
	countInitContainers
	countEphemeralContainers
	countVolumes
	countEnv
	countVolumeMounts
)

type tfield struct {
	index   int // for duplicate detection, unique within its struct
	node    *tnode
	ptr     bool
	counter counter
	// path marks a field on the way to the pod template, template the
	// template itself; either must be an object or null. where is its
	// dotted path, for errors.
	path, template bool
	where          string
}

// mapHeader is the fixed part of a Go map.
const mapHeader = 64

// maxStructFields bounds the fields of a scanned struct, so the set of
// fields seen in one object fits in a fixed array.
const maxStructFields = 256

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

type nodeBuilder struct {
	nodes map[reflect.Type]*tnode
}

func (b *nodeBuilder) node(t reflect.Type) *tnode {
	if n, ok := b.nodes[t]; ok {
		return n
	}
	n := &tnode{size: int64(t.Size())}
	b.nodes[t] = n
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		n.kind = tOpaque
		return n
	}
	switch t.Kind() {
	case reflect.Struct:
		n.kind = tStruct
		n.fields = map[string]*tfield{}
		b.addFields(n, t)
		if len(n.fields) > maxStructFields {
			panic(fmt.Sprintf("duck: %s has %d JSON fields, more than the scanner's %d", t, len(n.fields), maxStructFields))
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			n.kind = tBytes
			return n
		}
		n.kind = tSlice
		et := t.Elem()
		if et.Kind() == reflect.Pointer {
			n.elemPtr, et = true, et.Elem()
		}
		n.elem = b.node(et)
	case reflect.Map:
		n.kind = tMap
		n.elem = b.node(t.Elem())
	case reflect.String:
		n.kind = tString
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		n.kind = tScalar
	case reflect.Interface:
		n.kind = tOpaque
	}
	return n
}

// addFields adds t's fields to n as encoding/json sees them: embedded
// structs without a JSON name are flattened into their parent.
func (b *nodeBuilder) addFields(n *tnode, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				b.addFields(n, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := n.fields[name]; taken {
			continue // the shallower field wins, as in encoding/json
		}
		ptr := false
		if ft.Kind() == reflect.Pointer {
			ptr, ft = true, ft.Elem()
		}
		n.fields[name] = &tfield{index: len(n.fields), node: b.node(ft), ptr: ptr}
	}
}

// podJSON is the JSON form of a Pod as the Pod shape decodes it.
type podJSON struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              corev1.PodSpec `json:"spec,omitempty"`
}

// topJSON is the part of a workload a TemplateAt shape decodes besides
// the template.
type topJSON struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// scanNodes are the type trees of the built-in shapes, computed once.
type scanNodes struct {
	withPod, pod, top, template *tnode
}

var builtScanNodes = sync.OnceValue(func() *scanNodes {
	b := &nodeBuilder{nodes: map[reflect.Type]*tnode{}}
	ns := &scanNodes{
		withPod:  b.node(reflect.TypeFor[WithPod]()),
		pod:      b.node(reflect.TypeFor[podJSON]()),
		top:      b.node(reflect.TypeFor[topJSON]()),
		template: b.node(reflect.TypeFor[corev1.PodTemplateSpec]()),
	}
	spec := b.node(reflect.TypeFor[corev1.PodSpec]()).fields
	spec["containers"].counter = countContainers
	spec["initContainers"].counter = countInitContainers
	spec["ephemeralContainers"].counter = countEphemeralContainers
	spec["volumes"].counter = countVolumes
	for _, t := range []reflect.Type{reflect.TypeFor[corev1.Container](), reflect.TypeFor[corev1.EphemeralContainer]()} {
		fields := b.node(t).fields
		fields["env"].counter = countEnv
		fields["envFrom"].counter = countEnv
		fields["volumeMounts"].counter = countVolumeMounts
	}
	// WithPod's own spec and template lead to the template. Copies, so the
	// flags stay on WithPod's tree.
	specField := *ns.withPod.fields["spec"]
	specField.path, specField.where = true, "spec"
	specNode := *specField.node
	tmplField := *specNode.fields["template"]
	tmplField.template, tmplField.where = true, "spec.template"
	specNode.fields = map[string]*tfield{"template": &tmplField}
	specField.node = &specNode
	root := *ns.withPod
	root.fields = cloneFields(root.fields)
	root.fields["spec"] = &specField
	ns.withPod = &root
	return ns
})

func cloneFields(m map[string]*tfield) map[string]*tfield {
	out := make(map[string]*tfield, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// pathNodes caches the type tree of each TemplateAt shape, by pointer.
var pathNodes sync.Map // string -> *tnode

// scanRoot returns the type tree the shape decodes the object into.
func (s Shape) scanRoot() *tnode {
	ns := builtScanNodes()
	switch s.kind {
	case kindSpecTemplate:
		return ns.withPod
	case kindRoot:
		return ns.pod
	}
	if n, ok := pathNodes.Load(s.pointer); ok {
		return n.(*tnode)
	}
	// Objects along the path are not decoded into Go values of their own;
	// only the template at its end is.
	next := &tnode{kind: tStruct}
	root := next
	root.fields = cloneFields(ns.top.fields)
	root.size = ns.top.size
	for i, seg := range s.path {
		f := &tfield{index: len(next.fields), path: true, where: strings.Join(s.path[:i+1], ".")}
		if i == len(s.path)-1 {
			f.path, f.template, f.node = false, true, ns.template
		} else {
			f.node = &tnode{kind: tStruct, fields: map[string]*tfield{}}
		}
		if old, ok := next.fields[seg]; ok {
			f.index = old.index // a path through metadata replaces it
		}
		next.fields[seg] = f
		next = f.node
	}
	n, _ := pathNodes.LoadOrStore(s.pointer, root)
	return n.(*tnode)
}

// scanner walks JSON bytes with the type tree beside it.
type scanner struct {
	data      []byte
	pos       int
	depth     int
	maxDepth  int
	lastCount int // elements of the last array scanned
	stats     ObjectStats
	template  []byte
}

func (sc *scanner) syntax(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", sc.pos, fmt.Sprintf(format, args...))
}

func (sc *scanner) unexpectedEnd() error {
	return fmt.Errorf("invalid JSON at offset %d: unexpected end", sc.pos)
}

func (sc *scanner) skipSpace() {
	for sc.pos < len(sc.data) {
		switch sc.data[sc.pos] {
		case ' ', '\t', '\n', '\r':
			sc.pos++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end.
func (sc *scanner) peek() byte {
	if sc.pos < len(sc.data) {
		return sc.data[sc.pos]
	}
	return 0
}

func (sc *scanner) enter() error {
	sc.depth++
	if sc.depth > sc.maxDepth {
		return fmt.Errorf("at offset %d: %w: more than %d levels", sc.pos, ErrTooDeep, sc.maxDepth)
	}
	sc.stats.Depth = max(sc.stats.Depth, sc.depth)
	return nil
}

// value scans one JSON value that decodes into n (nil: skipped) and returns
// the bytes decoding allocates beyond the value's own Go storage.
func (sc *scanner) value(n *tnode) (int64, error) {
	sc.skipSpace()
	if sc.pos >= len(sc.data) {
		return 0, sc.unexpectedEnd()
	}
	start := sc.pos
	if n != nil && n.kind == tOpaque {
		// Charged its length, whatever its form.
		_, err := sc.value(nil)
		return int64(sc.pos - start), err
	}
	switch c := sc.data[sc.pos]; c {
	case '{':
		return sc.object(n)
	case '[':
		return sc.array(n)
	case '"':
		if _, err := sc.string(); err != nil {
			return 0, err
		}
		if n != nil && (n.kind == tString || n.kind == tBytes) {
			return int64(sc.pos - start), nil
		}
		return 0, nil
	case 't':
		return 0, sc.literal("true")
	case 'f':
		return 0, sc.literal("false")
	case 'n':
		return 0, sc.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return 0, sc.number()
	default:
		return 0, sc.syntax("invalid character %q looking for the beginning of a value", c)
	}
}

func (sc *scanner) object(n *tnode) (int64, error) {
	if err := sc.enter(); err != nil {
		return 0, err
	}
	sc.pos++ // '{'
	var (
		cost    int64
		seen    [maxStructFields / 64]uint64
		entries int64
	)
	isStruct := n != nil && n.kind == tStruct
	isMap := n != nil && n.kind == tMap
	sc.skipSpace()
	if sc.peek() == '}' {
		sc.pos++
		sc.depth--
		return 0, nil
	}
	for {
		sc.skipSpace()
		if sc.peek() != '"' {
			if sc.pos >= len(sc.data) {
				return 0, sc.unexpectedEnd()
			}
			return 0, sc.syntax("invalid character %q looking for the beginning of an object key", sc.data[sc.pos])
		}
		keyStart := sc.pos
		escaped, err := sc.string()
		if err != nil {
			return 0, err
		}
		key := sc.data[keyStart+1 : sc.pos-1]
		sc.skipSpace()
		if sc.peek() != ':' {
			if sc.pos >= len(sc.data) {
				return 0, sc.unexpectedEnd()
			}
			return 0, sc.syntax("invalid character %q after object key", sc.data[sc.pos])
		}
		sc.pos++
		switch {
		case isStruct:
			var f *tfield
			if escaped {
				var k string
				if err := kjson.UnmarshalCaseSensitivePreserveInts(sc.data[keyStart:keyStart+len(key)+2], &k); err != nil {
					return 0, sc.syntax("object key: %v", err)
				}
				f = n.fields[k]
			} else {
				f = n.fields[string(key)]
			}
			if f == nil {
				_, err = sc.value(nil)
				break
			}
			word, bit := f.index/64, uint64(1)<<(f.index%64)
			if seen[word]&bit != 0 {
				return 0, fmt.Errorf("invalid JSON at offset %d: duplicate field %q", keyStart, key)
			}
			seen[word] |= bit
			var c int64
			c, err = sc.field(f)
			cost += c
		case isMap:
			var c int64
			c, err = sc.value(n.elem)
			entries++
			cost += int64(len(key)) + c
		default:
			_, err = sc.value(nil)
		}
		if err != nil {
			return 0, err
		}
		sc.skipSpace()
		switch sc.peek() {
		case ',':
			sc.pos++
			continue
		case '}':
			sc.pos++
		case 0:
			return 0, sc.unexpectedEnd()
		default:
			return 0, sc.syntax("invalid character %q after object value", sc.data[sc.pos])
		}
		break
	}
	sc.depth--
	if isMap {
		// A map entry: the key's header, the value, and overhead, for a
		// table that doubles as it grows; a small map takes a group of
		// eight slots however few it holds.
		cost += mapHeader + 2*max(entries, 8)*(16+n.elem.size+8)
	}
	return cost, nil
}

// field scans the value of a struct field, charging a pointer's target and
// recording the lists ObjectStats counts and where the template is.
func (sc *scanner) field(f *tfield) (int64, error) {
	sc.skipSpace()
	start := sc.pos
	c := sc.peek()
	if (f.path || f.template) && c != '{' && c != 'n' && c != 0 {
		return 0, fmt.Errorf("%s is %s, not an object", f.where, kindOf(c))
	}
	cost, err := sc.value(f.node)
	if err != nil {
		return 0, err
	}
	if c == 'n' {
		return 0, nil // null: the field keeps its zero value
	}
	if f.ptr {
		cost += f.node.size
	}
	if f.template {
		sc.template = sc.data[start:sc.pos]
	}
	if f.counter != countNone && c == '[' {
		n := sc.lastCount
		switch f.counter {
		case countContainers:
			sc.stats.Containers = n
		case countInitContainers:
			sc.stats.InitContainers = n
		case countEphemeralContainers:
			sc.stats.EphemeralContainers = n
		case countVolumes:
			sc.stats.Volumes = n
		case countEnv:
			sc.stats.MaxEnv = max(sc.stats.MaxEnv, n)
		case countVolumeMounts:
			sc.stats.MaxVolumeMounts = max(sc.stats.MaxVolumeMounts, n)
		}
	}
	return cost, nil
}

func (sc *scanner) array(n *tnode) (int64, error) {
	if err := sc.enter(); err != nil {
		return 0, err
	}
	sc.pos++ // '['
	var elem *tnode
	isSlice := n != nil && n.kind == tSlice
	if isSlice {
		elem = n.elem
	}
	var cost int64
	count := 0
	sc.skipSpace()
	if sc.peek() == ']' {
		sc.pos++
		sc.depth--
		sc.lastCount = 0
		return 0, nil
	}
	for {
		sc.skipSpace()
		null := sc.peek() == 'n'
		c, err := sc.value(elem)
		if err != nil {
			return 0, err
		}
		count++
		cost += c
		if isSlice && n.elemPtr && !null {
			cost += elem.size
		}
		sc.skipSpace()
		switch sc.peek() {
		case ',':
			sc.pos++
			continue
		case ']':
			sc.pos++
		case 0:
			return 0, sc.unexpectedEnd()
		default:
			return 0, sc.syntax("invalid character %q after array element", sc.data[sc.pos])
		}
		break
	}
	sc.depth--
	if isSlice {
		slot := elem.size
		if n.elemPtr {
			slot = 8
		}
		// Decoding grows the backing array as it goes: up to twice the
		// elements, counting the arrays it outgrew.
		cost += 2 * int64(count) * slot
	}
	sc.lastCount = count
	return cost, nil
}

// string scans a JSON string starting at its opening quote and reports
// whether it holds escapes.
func (sc *scanner) string() (escaped bool, err error) {
	sc.pos++ // '"'
	for sc.pos < len(sc.data) {
		c := sc.data[sc.pos]
		switch {
		case c == '"':
			sc.pos++
			return escaped, nil
		case c == '\\':
			escaped = true
			sc.pos++
			if sc.pos >= len(sc.data) {
				return false, sc.unexpectedEnd()
			}
			switch sc.data[sc.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.pos++
			case 'u':
				sc.pos++
				for range 4 {
					if sc.pos >= len(sc.data) {
						return false, sc.unexpectedEnd()
					}
					if !isHex(sc.data[sc.pos]) {
						return false, sc.syntax("invalid character %q in \\u escape", sc.data[sc.pos])
					}
					sc.pos++
				}
			default:
				return false, sc.syntax("invalid escape \\%c in string", sc.data[sc.pos])
			}
		case c < 0x20:
			return false, sc.syntax("invalid control character %q in string", c)
		default:
			sc.pos++
		}
	}
	return false, sc.unexpectedEnd()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (sc *scanner) literal(word string) error {
	if len(sc.data)-sc.pos < len(word) {
		if string(sc.data[sc.pos:]) == word[:len(sc.data)-sc.pos] {
			sc.pos = len(sc.data)
			return sc.unexpectedEnd()
		}
		return sc.syntax("invalid literal, want %s", word)
	}
	if string(sc.data[sc.pos:sc.pos+len(word)]) != word {
		return sc.syntax("invalid literal, want %s", word)
	}
	sc.pos += len(word)
	return nil
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *scanner) number() error {
	if sc.peek() == '-' {
		sc.pos++
	}
	switch c := sc.peek(); {
	case c == '0':
		sc.pos++
	case '1' <= c && c <= '9':
		for isDigit(sc.peek()) {
			sc.pos++
		}
	case c == 0:
		return sc.unexpectedEnd()
	default:
		return sc.syntax("invalid character %q in number", c)
	}
	if sc.peek() == '.' {
		sc.pos++
		if !isDigit(sc.peek()) {
			return sc.numberError()
		}
		for isDigit(sc.peek()) {
			sc.pos++
		}
	}
	if c := sc.peek(); c == 'e' || c == 'E' {
		sc.pos++
		if c := sc.peek(); c == '+' || c == '-' {
			sc.pos++
		}
		if !isDigit(sc.peek()) {
			return sc.numberError()
		}
		for isDigit(sc.peek()) {
			sc.pos++
		}
	}
	return nil
}

func (sc *scanner) numberError() error {
	if sc.pos >= len(sc.data) {
		return sc.unexpectedEnd()
	}
	return sc.syntax("invalid character %q in number", sc.data[sc.pos])
}
