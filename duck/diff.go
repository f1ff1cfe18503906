package duck

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The differ walks typed values with reflection. Reflection on struct fields
// allocates (reflect.Type.Field copies the index slice), so the facts the walk
// needs are computed once per type. typeTable is built on first use from the
// closed set of types reachable from corev1.PodSpec and never changes
// afterwards: it is a constant that happens to be computed, not shared state.
var podSpecTable = sync.OnceValue(func() *typeTable {
	t := &typeTable{types: map[reflect.Type]*typeInfo{}}
	t.add(reflect.TypeFor[corev1.PodSpec]())
	return t
})

type leafKind uint8

const (
	notLeaf        leafKind = iota
	leafQuantity            // resource.Quantity: equal when Cmp says so
	leafTime                // metav1.Time: equal when the instants are
	leafComparable          // a comparable type with its own JSON form, e.g. IntOrString
	leafOther               // any other type with its own JSON form
)

type fieldInfo struct {
	index  int
	name   string
	omit   bool // omitempty or omitzero: absent from JSON when empty
	inline bool
	// serverDefault, for a field the kube-apiserver defaults, says whether
	// a value is its default (defaults.go).
	serverDefault isDefault
}

type typeInfo struct {
	leaf   leafKind
	fields []fieldInfo // for structs that are not leaves
}

type typeTable struct {
	types map[reflect.Type]*typeInfo
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

func (t *typeTable) add(typ reflect.Type) {
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		t.add(typ.Elem())
		return
	case reflect.Map:
		t.add(typ.Key())
		t.add(typ.Elem())
		return
	case reflect.Struct:
	default:
		return
	}
	if _, ok := t.types[typ]; ok {
		return
	}
	info := &typeInfo{}
	t.types[typ] = info
	switch {
	case typ == reflect.TypeFor[resource.Quantity]():
		info.leaf = leafQuantity
		return
	case typ == reflect.TypeFor[metav1.Time]():
		info.leaf = leafTime
		return
	case typ.Implements(marshalerType) || reflect.PointerTo(typ).Implements(marshalerType):
		// Its JSON form is not its Go fields, so it is replaced as a whole.
		if typ.Comparable() {
			info.leaf = leafComparable
		} else {
			info.leaf = leafOther
		}
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fi := fieldInfo{index: i, name: name}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty", "omitzero":
				fi.omit = true
			case "inline":
				fi.inline = true
			}
		}
		if f.Anonymous && name == "" {
			fi.inline = true
		}
		if fi.name == "" {
			fi.name = f.Name
		}
		fi.serverDefault = serverDefaults[typ][fi.name]
		info.fields = append(info.fields, fi)
		t.add(f.Type)
	}
}

// segment is one step of a JSON pointer below the patcher's base.
type segment struct {
	key   string
	index int // used when key is ""
}

// patcher collects the operations that turn one value into another.
// The path lives in a fixed array (pod specs nest about a dozen levels
// deep) so that walking an unchanged spec allocates nothing; deeper paths
// spill into extra.
type patcher struct {
	table *typeTable
	base  string
	depth int
	stack [24]segment
	extra []segment
	ops   []jsonpatch.Operation
}

func (p *patcher) pushSegment(s segment) {
	if p.depth < len(p.stack) {
		p.stack[p.depth] = s
	} else {
		p.extra = append(p.extra[:p.depth-len(p.stack)], s)
	}
	p.depth++
}

func (p *patcher) push(key string) { p.pushSegment(segment{key: key}) }
func (p *patcher) pushIndex(i int) { p.pushSegment(segment{index: i}) }
func (p *patcher) pop()            { p.depth-- }

func (p *patcher) path() string {
	var b strings.Builder
	b.WriteString(p.base)
	for i := range p.depth {
		var s segment
		if i < len(p.stack) {
			s = p.stack[i]
		} else {
			s = p.extra[i-len(p.stack)]
		}
		b.WriteByte('/')
		if s.key == "" {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			writeEscaped(&b, s.key)
		}
	}
	return b.String()
}

func (p *patcher) emit(op string, value any) {
	p.ops = append(p.ops, jsonpatch.Operation{Operation: op, Path: p.path(), Value: value})
}

// writeEscaped writes a JSON pointer reference token (RFC 6901).
func writeEscaped(b *strings.Builder, s string) {
	for i := range len(s) {
		switch s[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(s[i])
		}
	}
}

func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	var b strings.Builder
	writeEscaped(&b, s)
	return b.String()
}

// empty reports whether v is left out of JSON by omitempty (or omitzero for
// structs), which is how the differ decides a member is absent.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	default:
		return v.IsZero()
	}
}

// diffMember diffs an object member that the JSON may not hold when empty.
func (p *patcher) diffMember(a, b reflect.Value, omit bool) {
	ae, be := empty(a), empty(b)
	switch {
	case ae && be:
		return
	case ae:
		// The member may be absent, and "add" works whether it is or not.
		p.emit("add", b.Interface())
		return
	case be:
		if omit {
			p.emit("remove", nil)
		} else {
			p.emit("replace", b.Interface())
		}
		return
	}
	p.diffPresent(a, b)
}

// diffPresent diffs two values that both exist in the JSON at p.path().
func (p *patcher) diffPresent(a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				p.emit("replace", b.Interface())
			}
			return
		}
		p.diffPresent(a.Elem(), b.Elem())
	case reflect.Struct:
		info := p.table.types[a.Type()]
		if info == nil || info.leaf != notLeaf {
			if !p.table.equal(a, b) {
				p.emit("replace", b.Interface())
			}
			return
		}
		p.diffFields(info, a, b)
	case reflect.Slice:
		p.diffSlice(a, b)
	case reflect.Map:
		p.diffMap(a, b)
	default:
		if !p.table.equal(a, b) {
			p.emit("replace", b.Interface())
		}
	}
}

func (p *patcher) diffFields(info *typeInfo, a, b reflect.Value) {
	for i := range info.fields {
		f := &info.fields[i]
		fa, fb := a.Field(f.index), b.Field(f.index)
		if f.inline {
			if fa.Kind() == reflect.Pointer {
				if fa.IsNil() || fb.IsNil() {
					if !p.table.equal(fa, fb) {
						// An inline pointer's fields sit in the parent; rare
						// enough in pod specs to replace the parent instead.
						p.emit("replace", b.Interface())
						return
					}
					continue
				}
				fa, fb = fa.Elem(), fb.Elem()
			}
			p.diffPresent(fa, fb)
			continue
		}
		if defaultedUnset(f, b, fa, fb) {
			continue // the server fills it in again: no change
		}
		p.push(f.name)
		p.diffMember(fa, fb, f.omit)
		p.pop()
	}
}

// diffSlice keeps the common head and tail of the two slices and diffs the
// middle index by index, so that inserting or removing one element (what a
// Binding's Do and Undo usually do) gives one operation and leaves the other
// elements, and any fields of theirs the duck type does not know, alone.
func (p *patcher) diffSlice(a, b reflect.Value) {
	na, nb := a.Len(), b.Len()
	n := min(na, nb)
	head := 0
	for head < n && p.table.equal(a.Index(head), b.Index(head)) {
		head++
	}
	tail := 0
	for tail < n-head && p.table.equal(a.Index(na-1-tail), b.Index(nb-1-tail)) {
		tail++
	}
	ma, mb := na-head-tail, nb-head-tail
	common := min(ma, mb)
	for i := head; i < head+common; i++ {
		p.pushIndex(i)
		ai, bi := a.Index(i), b.Index(i)
		if ai.Kind() == reflect.Struct && ai.IsZero() {
			// A zero element may be a JSON null, inside which no finer
			// operation applies.
			if !p.table.equal(ai, bi) {
				p.emit("replace", bi.Interface())
			}
		} else {
			p.diffPresent(ai, bi)
		}
		p.pop()
	}
	// Removals go from the highest index down so each index is still valid.
	for i := head + ma - 1; i >= head+common; i-- {
		p.pushIndex(i)
		p.emit("remove", nil)
		p.pop()
	}
	for i := head + common; i < head+mb; i++ {
		p.pushIndex(i)
		p.emit("add", b.Index(i).Interface())
		p.pop()
	}
}

func (p *patcher) diffMap(a, b reflect.Value) {
	if p.table.equal(a, b) {
		return
	}
	keys := make([]string, 0, a.Len()+b.Len())
	for _, k := range a.MapKeys() {
		keys = append(keys, k.String())
	}
	for _, k := range b.MapKeys() {
		if !a.MapIndex(k).IsValid() {
			keys = append(keys, k.String())
		}
	}
	slices.Sort(keys)
	kt := a.Type().Key()
	for _, k := range keys {
		kv := reflect.ValueOf(k).Convert(kt)
		va, vb := a.MapIndex(kv), b.MapIndex(kv)
		p.push(k)
		switch {
		case !vb.IsValid():
			p.emit("remove", nil)
		case !va.IsValid():
			p.emit("add", vb.Interface())
		case !p.table.equal(va, vb):
			p.emit("replace", vb.Interface())
		}
		p.pop()
	}
}

// equal reports whether a and b, of the same type, have the same JSON form,
// without allocating for the types of a pod spec.
func (t *typeTable) equal(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return t.equal(a.Elem(), b.Elem())
	case reflect.Struct:
		info := t.types[a.Type()]
		if info == nil {
			return equality.Semantic.DeepEqual(a.Interface(), b.Interface())
		}
		switch info.leaf {
		case leafQuantity:
			qa, qb := quantityOf(a), quantityOf(b)
			return qa.Cmp(qb) == 0
		case leafTime:
			ta, tb := timeOf(a), timeOf(b)
			return ta.Equal(&tb)
		case leafComparable:
			return a.Equal(b)
		case leafOther:
			return equality.Semantic.DeepEqual(a.Interface(), b.Interface())
		}
		for _, f := range info.fields {
			if !t.equal(a.Field(f.index), b.Field(f.index)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !t.equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 {
			return true
		}
		switch ma := a.Interface().(type) {
		case map[string]string:
			return mapsEqual(ma, b.Interface().(map[string]string))
		case corev1.ResourceList:
			mb := b.Interface().(corev1.ResourceList)
			for k, qa := range ma {
				qb, ok := mb[k]
				if !ok || qa.Cmp(qb) != 0 {
					return false
				}
			}
			return true
		}
		iter := a.MapRange()
		for iter.Next() {
			vb := b.MapIndex(iter.Key())
			if !vb.IsValid() || !t.equal(iter.Value(), vb) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	default:
		return equality.Semantic.DeepEqual(a.Interface(), b.Interface())
	}
}

// quantityOf reads a Quantity without copying it to the heap; values reached
// through a pointer are addressable.
func quantityOf(v reflect.Value) resource.Quantity {
	if v.CanAddr() {
		return *(v.Addr().Interface().(*resource.Quantity))
	}
	return v.Interface().(resource.Quantity)
}

func timeOf(v reflect.Value) metav1.Time {
	if v.CanAddr() {
		return *(v.Addr().Interface().(*metav1.Time))
	}
	return v.Interface().(metav1.Time)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		if vb, ok := b[k]; !ok || va != vb {
			return false
		}
	}
	return true
}

// diffStringMap adds to ops the operations that turn the string map at
// prefix+field from a into b: the whole map when it appears or disappears,
// one operation per key otherwise, keys in sorted order. The path is only
// built when something changed.
func diffStringMap(ops []jsonpatch.Operation, prefix, field string, a, b map[string]string) []jsonpatch.Operation {
	if mapsEqual(a, b) {
		return ops
	}
	path := prefix + field
	switch {
	case len(a) == 0:
		return append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: b})
	case len(b) == 0:
		return append(ops, jsonpatch.Operation{Operation: "remove", Path: path})
	}
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, cmp.Compare[string])
	for _, k := range keys {
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inB:
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: path + "/" + escapeToken(k)})
		case !inA:
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path + "/" + escapeToken(k), Value: vb})
		case va != vb:
			ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: path + "/" + escapeToken(k), Value: vb})
		}
	}
	return ops
}

// AnnotationPath is the JSON pointer of an object's annotation key:
// "/metadata/annotations/" and the key, escaped (RFC 6901).
func AnnotationPath(key string) string { return "/metadata/annotations/" + escapeToken(key) }
