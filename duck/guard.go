package duck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

// Guard returns ops preceded by the JSON patch "test" operations that make
// them apply only while what they depend on is as it was in obj, the
// object (as the dynamic client returns it) that ops were computed from.
// A patch guarded this way succeeds however much else of the object other
// clients change meanwhile, and fails with 422 Unprocessable Entity when
// someone changed a field it would overwrite or a list it would insert
// into: the caller then reads the object again and recomputes.
//
// For each operation it tests:
//
//   - replace and remove: the old value at the path;
//   - add into a list: the whole old list;
//   - add of an object member: the old value when the member exists, its
//     absence otherwise (a test with no value, which the kube-apiserver
//     treats as "absent or null");
//   - on the way to the path, the name of every list element the path goes
//     through, when the element has one: pod spec lists (containers,
//     volumes, env, mounts) are keyed by name, and an index must still
//     point at the element it was computed for.
//
// Each path is tested once, before any operation. Guard fails when an
// operation's path does not resolve in obj, which means ops were not
// computed from obj.
func Guard(obj map[string]any, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	return guard(mapDocument{obj}, ops)
}

// GuardJSON is Guard for an object held as the JSON the kube-apiserver
// sent (an item of a RawList, say): the same tests of the same values,
// read from raw. A tested value is the json.RawMessage of its JSON in raw
// (MarshalPatch writes it as it is); the object is not decoded.
func GuardJSON(raw []byte, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	return guard(newJSONDocument(raw), ops)
}

// document is the object Guard reads. A value in it is what walk
// returns: a Go value for an object as the dynamic client decodes it, the
// JSON of the value for an object as JSON.
type document interface {
	// walk returns the values at the beginnings of tokens (path's), the
	// object first, as far as they resolve: len(tokens)+1 values when the
	// whole path does.
	walk(path string, tokens []string) []any
	// kind is the first byte of the JSON of v: '{' an object, '[' a list.
	kind(v any) byte
	// tested is v as a test operation carries it.
	tested(v any) any
	// name is v's member "name", when v is an object and it is a string.
	name(v any) (string, bool)
}

func guard(doc document, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	var tests []jsonpatch.Operation
	tested := map[string]bool{}
	test := func(path string, value any) {
		if !tested[path] {
			tested[path] = true
			tests = append(tests, jsonpatch.Operation{Operation: "test", Path: path, Value: value})
		}
	}
	for _, op := range ops {
		tokens, err := splitPointer(op.Path)
		if err != nil {
			return nil, err
		}
		n := len(tokens)
		vals := doc.walk(op.Path, tokens)
		if len(vals) < n {
			return nil, fmt.Errorf("guard %s %s: parent not in the object", op.Operation, op.Path)
		}
		// Identity of every list element the path goes through.
		for i := range n - 1 {
			if doc.kind(vals[i]) != '[' {
				continue
			}
			if name, ok := doc.name(vals[i+1]); ok {
				test(joinPointer(tokens[:i+1])+"/name", name)
			}
		}
		switch op.Operation {
		case "replace", "remove":
			if len(vals) <= n {
				return nil, fmt.Errorf("guard %s %s: no such member in the object", op.Operation, op.Path)
			}
			test(op.Path, doc.tested(vals[n]))
		case "add":
			switch parent := vals[n-1]; doc.kind(parent) {
			case '[':
				test(joinPointer(tokens[:n-1]), doc.tested(parent))
			case '{':
				if len(vals) > n {
					test(op.Path, doc.tested(vals[n]))
				} else {
					test(op.Path, nil) // absent
				}
			default:
				return nil, fmt.Errorf("guard add %s: parent is %s, not an object or a list", op.Path, jsonscan.KindOf(doc.kind(parent)))
			}
		default:
			return nil, fmt.Errorf("guard %s %s: unsupported operation", op.Operation, op.Path)
		}
	}
	if len(tests) == 0 {
		return ops, nil
	}
	return append(tests, ops...), nil
}

// mapDocument is an object as the dynamic client decodes it.
type mapDocument struct{ obj map[string]any }

func (d mapDocument) walk(_ string, tokens []string) []any {
	vals := make([]any, 1, len(tokens)+1)
	vals[0] = d.obj
	for _, tok := range tokens {
		next, ok := lookup(vals[len(vals)-1], tok)
		if !ok {
			break
		}
		vals = append(vals, next)
	}
	return vals
}

func (mapDocument) kind(v any) byte {
	switch v.(type) {
	case map[string]any:
		return '{'
	case []any:
		return '['
	case string:
		return '"'
	case bool:
		return 't'
	case nil:
		return 'n'
	}
	return '0'
}

func (mapDocument) tested(v any) any { return v }

func (mapDocument) name(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	name, ok := m["name"].(string)
	return name, ok
}

// jsonDocument is an object as JSON. It remembers where it found each
// value it located, so that the operations of one patch, whose paths
// share their beginnings, scan the object about once.
type jsonDocument struct {
	raw []byte
	// found holds the JSON of the values located, by the beginning of the
	// path that leads to them (as written in an operation's path: the
	// same beginning is the same tokens).
	found map[string][]byte
}

func newJSONDocument(raw []byte) *jsonDocument {
	return &jsonDocument{raw: trimSpace(raw), found: map[string][]byte{}}
}

func (d *jsonDocument) walk(path string, tokens []string) []any {
	// ends[i] is where the beginning of path holding tokens[:i] ends.
	ends := make([]int, 1, len(tokens)+1)
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			ends = append(ends, i)
		}
	}
	ends = append(ends, len(path))
	vals := make([]any, 1, len(tokens)+1)
	vals[0] = d.raw
	for i, tok := range tokens {
		key := path[:ends[i+1]]
		next, ok := d.found[key]
		if !ok {
			next = d.child(vals[i].([]byte), tok)
			if next == nil {
				break
			}
			d.found[key] = next
		}
		vals = append(vals, next)
	}
	return vals
}

// child returns the JSON of member or element tok of the JSON cur (as
// lookup reads it), nil when it has none.
func (d *jsonDocument) child(cur []byte, tok string) []byte {
	var next []byte
	switch cur[0] {
	case '{':
		next, _ = jsonscan.Member(cur, tok, 0)
	case '[':
		next = element(cur, tok)
	}
	if next = trimSpace(next); len(next) == 0 {
		return nil
	}
	return next
}

func (*jsonDocument) kind(v any) byte { return v.([]byte)[0] }

func (*jsonDocument) tested(v any) any { return json.RawMessage(v.([]byte)) }

func (d *jsonDocument) name(v any) (string, bool) {
	raw := v.([]byte)
	if raw[0] != '{' {
		return "", false
	}
	member, err := jsonscan.Member(raw, "name", 0)
	if err != nil || len(member) == 0 || member[0] != '"' {
		return "", false
	}
	var name string
	if kjson.UnmarshalCaseSensitivePreserveInts(member, &name) != nil {
		return "", false
	}
	return name, true
}

// at returns the value at tokens decoded, and whether there is one.
func (d *jsonDocument) at(tokens []string) (any, bool) {
	path := joinPointer(tokens)
	vals := d.walk(path, tokens)
	if len(vals) <= len(tokens) {
		return nil, false
	}
	var v any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(vals[len(tokens)].([]byte), &v); err != nil {
		return nil, false
	}
	return v, true
}

// element returns the JSON of element tok (a decimal index, as lookup
// reads it) of the JSON list raw, nil when there is none.
func element(raw []byte, tok string) []byte {
	want, err := strconv.Atoi(tok)
	if err != nil || want < 0 || strconv.Itoa(want) != tok {
		return nil
	}
	pos := 1 // after '['
	for i := 0; ; i++ {
		pos = skipSpace(raw, pos)
		if pos >= len(raw) || raw[pos] == ']' {
			return nil
		}
		end, err := jsonscan.SkipValue(raw, pos, 1, 0)
		if err != nil {
			return nil
		}
		if i == want {
			return raw[pos:end]
		}
		pos = skipSpace(raw, end)
		if pos >= len(raw) || raw[pos] != ',' {
			return nil
		}
		pos++
	}
}

// skipSpace returns the offset of the first byte at or after pos in b
// that is not JSON's white space.
func skipSpace(b []byte, pos int) int {
	return len(b) - len(bytes.TrimLeft(b[pos:], " \t\r\n"))
}

// trimSpace drops JSON's white space around b.
func trimSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// splitPointer splits a JSON pointer (RFC 6901) into unescaped tokens. The
// root pointer "" has no tokens and is refused: no operation replaces a
// whole workload.
func splitPointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

func joinPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		writeEscaped(&b, t)
	}
	return b.String()
}

// resolve walks tokens from obj.
func resolve(obj any, tokens []string) (any, bool) {
	cur := obj
	for _, t := range tokens {
		next, ok := lookup(cur, t)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// lookup reads member or element tok of v.
func lookup(v any, tok string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		x, ok := c[tok]
		return x, ok
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != tok {
			return nil, false
		}
		return c[i], true
	}
	return nil, false
}

func child(v any, tok string) any {
	x, _ := lookup(v, tok)
	return x
}

// childOfList reports whether the value at tokens is an element of a list.
func childOfList(obj any, tokens []string) (any, bool) {
	parent, ok := resolve(obj, tokens[:len(tokens)-1])
	if !ok {
		return nil, false
	}
	_, isList := parent.([]any)
	return parent, isList
}

// GuardedPaths returns the paths of the tests at the head of a patch Guard
// returned, for error messages and tests.
func GuardedPaths(ops []jsonpatch.Operation) []string {
	var out []string
	for _, op := range ops {
		if op.Operation != "test" {
			break
		}
		out = append(out, op.Path)
	}
	return slices.Clip(out)
}

// MarshalPatch encodes ops as a JSON patch document. Unlike encoding the
// operations with encoding/json, it keeps a value that is empty ("", 0,
// false): jsonpatch.Operation's Value is omitempty, and an add, replace or
// test without a value is another operation (or none). A test with a nil
// Value is written without one, which Guard uses to test for absence.
func MarshalPatch(ops []jsonpatch.Operation) ([]byte, error) {
	type withValue struct {
		Operation string `json:"op"`
		Path      string `json:"path"`
		Value     any    `json:"value"`
	}
	type withoutValue struct {
		Operation string `json:"op"`
		Path      string `json:"path"`
	}
	out := make([]any, len(ops))
	for i, op := range ops {
		switch {
		case op.Operation == "remove", op.Operation == "test" && op.Value == nil:
			out[i] = withoutValue{op.Operation, op.Path}
		default:
			out[i] = withValue{op.Operation, op.Path, op.Value}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode JSON patch: %w", err)
	}
	return b, nil
}

// GuardIdentity prefixes ops with tests of identity only: the name of
// every named list element each path goes through or removes or replaces,
// as obj holds it; values are not tested. It guards a patch kept for later
// (a rollback, see RollbackAnnotation) against the index shifts that
// other writers' inserts and removals cause, without failing on what the
// API server fills in meanwhile (the defaults of a container the patch
// removes, say). Like Guard, it fails when a path does not resolve in obj.
func GuardIdentity(obj map[string]any, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	var tests []jsonpatch.Operation
	tested := map[string]bool{}
	for _, op := range ops {
		tokens, err := splitPointer(op.Path)
		if err != nil {
			return nil, err
		}
		upto := len(tokens) - 1
		if op.Operation == "remove" || op.Operation == "replace" {
			upto = len(tokens)
		}
		if _, ok := resolve(obj, tokens[:len(tokens)-1]); !ok {
			return nil, fmt.Errorf("guard %s %s: parent not in the object", op.Operation, op.Path)
		}
		var cur any = obj
		for i, tok := range tokens[:upto] {
			cur = child(cur, tok)
			if _, inList := childOfList(obj, tokens[:i+1]); !inList {
				continue
			}
			if m, ok := cur.(map[string]any); ok {
				if name, ok := m["name"].(string); ok {
					if p := joinPointer(tokens[:i+1]) + "/name"; !tested[p] {
						tested[p] = true
						tests = append(tests, jsonpatch.Operation{Operation: "test", Path: p, Value: name})
					}
				}
			}
		}
	}
	return append(tests, ops...), nil
}
