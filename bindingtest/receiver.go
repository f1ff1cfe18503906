package bindingtest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
)

// maxBindingChanges is how many changed fields of a Binding a failure
// names.
const maxBindingChanges = 4

// bindingChanges names the fields in which after differs from before, two
// values of one Binding type, one a line: `spec.noProxy: ["a"] before,
// ["a" "b"] after`. Fields are named as the Binding's JSON names them, or
// by their Go name where it has none (`json:"-"`, unexported): a Binding
// that remembers something in a field the API server never sees is the
// commonest case. Values are compared as the API server's types compare
// them (equality.Semantic: a Quantity whose String() cached its text is
// unchanged); nil and empty lists and maps are the same.
func bindingChanges(before, after any) []string {
	var out []string
	walkChanges("", reflect.ValueOf(before), reflect.ValueOf(after), 0, &out)
	return out
}

// maxWalkDepth bounds the walk, for Bindings that hold a cycle.
const maxWalkDepth = 32

func walkChanges(path string, a, b reflect.Value, depth int, out *[]string) {
	if len(*out) >= maxBindingChanges || depth > maxWalkDepth {
		return
	}
	if !a.IsValid() || !b.IsValid() || a.Type() != b.Type() {
		if a.IsValid() != b.IsValid() || (a.IsValid() && a.Type() != b.Type()) {
			addChange(path, a, b, out)
		}
		return
	}
	if _, ok := equality.Semantic.Equalities[a.Type()]; ok && a.CanInterface() {
		if !equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
			addChange(path, a, b, out)
		}
		return
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				addChange(path, a, b, out)
			}
			return
		}
		walkChanges(path, a.Elem(), b.Elem(), depth+1, out)
	case reflect.Struct:
		for i := range a.NumField() {
			walkChanges(fieldPath(path, a.Type().Field(i)), a.Field(i), b.Field(i), depth+1, out)
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			addChange(path, a, b, out)
			return
		}
		for i := range a.Len() {
			walkChanges(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), depth+1, out)
		}
	case reflect.Map:
		walkMap(path, a, b, depth, out)
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		if a.Pointer() != b.Pointer() {
			addChange(path, a, b, out)
		}
	default:
		if !sameScalar(a, b) {
			addChange(path, a, b, out)
		}
	}
}

// walkMap compares two maps entry by entry, in the order of their keys'
// text.
func walkMap(path string, a, b reflect.Value, depth int, out *[]string) {
	keys := map[string]reflect.Value{}
	for _, m := range []reflect.Value{a, b} {
		for _, k := range m.MapKeys() {
			keys[fmt.Sprint(k)] = k
		}
	}
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := keys[name]
		walkChanges(fmt.Sprintf("%s[%s]", path, name), a.MapIndex(k), b.MapIndex(k), depth+1, out)
	}
}

// sameScalar compares two values of one scalar kind, exported or not.
func sameScalar(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	case reflect.String:
		return a.String() == b.String()
	}
	return true
}

// fieldPath is path followed by the field's name: its JSON name, none for
// an embedded struct the JSON inlines, else its Go name.
func fieldPath(path string, f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "" && f.Anonymous:
		return path
	case name == "" || name == "-":
		name = f.Name
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// addChange notes one changed field.
func addChange(path string, a, b reflect.Value, out *[]string) {
	if path == "" {
		path = "the Binding"
	}
	*out = append(*out, fmt.Sprintf("%s: %s before, %s after", path, shortValue(a), shortValue(b)))
}

// shortValue is v for a message, cut at 80 bytes.
func shortValue(v reflect.Value) string {
	if !v.IsValid() {
		return "none"
	}
	var s string
	switch k := v.Kind(); {
	case (k == reflect.Pointer || k == reflect.Interface || k == reflect.Slice || k == reflect.Map) && v.IsNil():
		s = "nil"
	case k == reflect.Pointer || k == reflect.Interface:
		return shortValue(v.Elem())
	case k == reflect.Func:
		s = "a func"
	case k == reflect.String, (k == reflect.Slice || k == reflect.Array) && v.Type().Elem().Kind() == reflect.String:
		s = fmt.Sprintf("%q", v)
	default:
		s = fmt.Sprintf("%v", v)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
