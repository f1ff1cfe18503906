package jsonscan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
)

// Kind says how a Type's JSON decodes.
type Kind uint8

// The kinds of Type.
const (
	Skip   Kind = iota // nothing the estimate charges for
	Struct             // an object whose members are Fields
	Slice              // an array of Elem
	Bytes              // []byte: a base64 string
	Map                // an object of Elem values
	String             // a string
	Scalar             // a bool or number stored in place
	Opaque             // its own UnmarshalJSON (Quantity, Time, RawExtension...): charged its JSON's length
)

// Type is what a scan knows of the Go type a JSON value decodes into: how
// it decodes and what one Go value of it takes. A Builder makes Types from
// reflection; callers may mark Fields of their copies.
//
// A Type's Fields must not change once it has been scanned: the first scan
// indexes them.
type Type struct {
	Kind    Kind
	Size    int64             // bytes of one Go value
	Fields  map[string]*Field // of a Struct, by JSON name, embedded structs flattened
	Elem    *Type             // of a Slice or Map
	ElemPtr bool              // a slice of pointers

	index atomic.Pointer[fieldIndex]
}

// fieldIndex finds a Struct's fields by comparing the names of the key's
// length: cheaper than hashing every key of the JSON.
type fieldIndex struct {
	byLen [][]namedField
}

type namedField struct {
	name  string
	field *Field
}

// field returns the Field of n called key, or nil.
func (n *Type) field(key []byte) *Field {
	ix := n.index.Load()
	if ix == nil {
		// Built from Fields, which no longer change; two scans racing here
		// build the same index.
		ix = &fieldIndex{}
		for name, f := range n.Fields {
			for len(ix.byLen) <= len(name) {
				ix.byLen = append(ix.byLen, nil)
			}
			ix.byLen[len(name)] = append(ix.byLen[len(name)], namedField{name, f})
		}
		n.index.Store(ix)
	}
	if len(key) >= len(ix.byLen) {
		return nil
	}
	for _, nf := range ix.byLen[len(key)] {
		if nf.name == string(key) {
			return nf.field
		}
	}
	return nil
}

// Field is a member of a Struct Type.
type Field struct {
	Index int // unique within its Struct, for duplicate detection
	Type  *Type
	Ptr   bool // a pointer: decoding allocates Type.Size
	// Count, when not zero, makes the scan record the length of a list in
	// this field in Result.Counts[Count], the longest if there are many.
	Count int
	// Object makes a value other than an object or null an error that
	// names Where.
	Object bool
	// Mark makes the scan record the value's JSON in Result.Marked, unless
	// it is null.
	Mark  bool
	Where string
}

// MaxCounts bounds Field.Count.
const MaxCounts = 8

// maxStructFields bounds the fields of a Struct, so the set of fields seen
// in one object fits in a fixed array.
const maxStructFields = 256

// mapHeader is the fixed part of a Go map.
const mapHeader = 64

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// Builder makes Types from reflection, each Go type once. Types it returns
// are shared between its calls; a caller that marks fields marks them for
// every use of that Type from the same Builder.
type Builder struct {
	types map[reflect.Type]*Type
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{types: map[reflect.Type]*Type{}} }

// TypeOf returns the Type of t as encoding/json decodes it.
func (b *Builder) TypeOf(t reflect.Type) *Type {
	if n, ok := b.types[t]; ok {
		return n
	}
	n := &Type{Size: int64(t.Size())}
	b.types[t] = n
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		n.Kind = Opaque
		return n
	}
	switch t.Kind() {
	case reflect.Struct:
		n.Kind = Struct
		n.Fields = map[string]*Field{}
		b.addFields(n, t)
		if len(n.Fields) > maxStructFields {
			panic(fmt.Sprintf("jsonscan: %s has %d JSON fields, more than %d", t, len(n.Fields), maxStructFields))
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			n.Kind = Bytes
			return n
		}
		n.Kind = Slice
		et := t.Elem()
		if et.Kind() == reflect.Pointer {
			n.ElemPtr, et = true, et.Elem()
		}
		n.Elem = b.TypeOf(et)
	case reflect.Map:
		n.Kind = Map
		n.Elem = b.TypeOf(t.Elem())
	case reflect.String:
		n.Kind = String
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		n.Kind = Scalar
	case reflect.Interface:
		n.Kind = Opaque
	}
	return n
}

// addFields adds t's fields to n as encoding/json sees them: embedded
// structs without a JSON name are flattened into their parent, and of two
// fields with one name the shallower wins.
func (b *Builder) addFields(n *Type, t reflect.Type) {
	b.addFieldsAt(n, t, 0, map[string]int{})
}

func (b *Builder) addFieldsAt(n *Type, t reflect.Type, depth int, depths map[string]int) {
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
				b.addFieldsAt(n, ft, depth+1, depths)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		index := len(n.Fields)
		if old, taken := n.Fields[name]; taken {
			if depths[name] <= depth {
				continue // the shallower field wins, as in encoding/json
			}
			index = old.Index
		}
		ptr := false
		if ft.Kind() == reflect.Pointer {
			ptr, ft = true, ft.Elem()
		}
		n.Fields[name] = &Field{Index: index, Type: b.TypeOf(ft), Ptr: ptr}
		depths[name] = depth
	}
}

// CloneFields returns a copy of n whose Fields map, and the Fields in it,
// are its own: a caller marks fields of the copy without touching n.
func (n *Type) CloneFields() *Type {
	c := &Type{Kind: n.Kind, Size: n.Size, Elem: n.Elem, ElemPtr: n.ElemPtr}
	c.Fields = make(map[string]*Field, len(n.Fields)+1)
	for k, f := range n.Fields {
		fc := *f
		c.Fields[k] = &fc
	}
	return c
}
