package jsonscan

import (
	"errors"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// ErrTooDeep is wrapped by the error of a scan that met JSON nested deeper
// than its limit.
var ErrTooDeep = errors.New("JSON nested too deep")

// MaxDepth is the nesting encoding/json, and the kube-apiserver's decoder,
// accept.
const MaxDepth = 10000

// Result is what Scan learned.
type Result struct {
	// Depth is the deepest nesting of objects and arrays; the top-level
	// object is at depth 1.
	Depth int
	// Bytes estimates, from above, the heap that decoding the JSON into the
	// scanned Type allocates, the Type's own Size included: the Go values
	// of the fields it knows, with room for slices and maps grown while
	// decoding. Members the Type does not know cost nothing.
	Bytes int64
	// Counts are the lengths of lists in Fields with a Count.
	Counts [MaxCounts]int
	// Marked is the JSON of a Field with Mark; nil when absent or null.
	Marked []byte
}

// Scan reads raw, which must be a JSON object, as decoding it into root
// would, without decoding it. It fails on malformed JSON, on nesting deeper
// than maxDepth (0: MaxDepth) with an error wrapping ErrTooDeep, on a field
// of a Struct given twice (encoding/json would merge the two, a JSON patch
// library would keep the last) and on a Field with Object whose value is
// not an object or null.
func Scan(raw []byte, root *Type, maxDepth int) (Result, error) {
	sc := scanner{data: raw, maxDepth: depthLimit(maxDepth)}
	if err := sc.top(); err != nil {
		return Result{}, err
	}
	cost, err := sc.value(root)
	if err != nil {
		return Result{}, err
	}
	if err := sc.end(); err != nil {
		return Result{}, err
	}
	sc.res.Bytes = cost + root.Size
	return sc.res, nil
}

// Member returns the JSON of the first member called name of the JSON
// object raw, nil when it has none. It stops at that member, so it costs a
// scan of what comes before it, and decodes and copies nothing. It fails
// on JSON that is malformed up to there, nested deeper than maxDepth (0:
// MaxDepth), or not an object.
func Member(raw []byte, name string, maxDepth int) ([]byte, error) {
	sc := scanner{data: raw, maxDepth: depthLimit(maxDepth)}
	if err := sc.top(); err != nil {
		return nil, err
	}
	sc.pos++ // '{'
	sc.depth = 1
	sc.skipSpace()
	if sc.peek() == '}' {
		return nil, nil
	}
	for {
		key, escaped, err := sc.key()
		if err != nil {
			return nil, err
		}
		sc.skipSpace()
		start := sc.pos
		if _, err := sc.value(nil); err != nil {
			return nil, err
		}
		if keyIs(key, escaped, name) {
			return raw[start:sc.pos], nil
		}
		if done, err := sc.next('}'); err != nil || done {
			return nil, err
		}
	}
}

// SkipValue validates the one JSON value that starts at data[pos:], after any
// space, as Scan validates what it steps over, and returns the offset just
// after it. depth is the nesting around the value (1 for a member of a
// top-level object); the value fails with an error wrapping ErrTooDeep
// when it nests past maxDepth (0: MaxDepth). It lets a caller that reads a
// few members of an object itself validate the others in the same pass.
func SkipValue(data []byte, pos, depth, maxDepth int) (int, error) {
	sc := scanner{data: data, pos: pos, depth: depth, maxDepth: depthLimit(maxDepth)}
	if _, err := sc.value(nil); err != nil {
		return 0, err
	}
	return sc.pos, nil
}

// DepthLimit is the nesting limit Scan, Member and SkipValue apply for
// maxDepth: MaxDepth when it is not positive or above MaxDepth.
func DepthLimit(maxDepth int) int { return depthLimit(maxDepth) }

// MapBytes is what Scan charges for a JSON object of entries members
// decoded into a map of Elem elem, beyond the keys' and values' own bytes
// (each key's length, and what its value's Type charges): the map's header
// and a table that doubles as it grows.
func MapBytes(elem *Type, entries int) int64 {
	if entries == 0 {
		return mapHeader
	}
	// A map entry: the key's header, the value, and overhead; a small map
	// takes a group of eight slots however few it holds.
	return mapHeader + 2*max(int64(entries), 8)*(16+elem.Size+8)
}

func depthLimit(d int) int {
	if d <= 0 || d > MaxDepth {
		return MaxDepth
	}
	return d
}

func keyIs(key []byte, escaped bool, name string) bool {
	if !escaped {
		return string(key) == name
	}
	return unescape(key) == name
}

// unescape returns the key a quoted key with escapes decodes to, or ""
// for one that does not decode (the scan reports those).
func unescape(quotedContent []byte) string {
	var k string
	quoted := make([]byte, 0, len(quotedContent)+2)
	quoted = append(append(append(quoted, '"'), quotedContent...), '"')
	if kjson.UnmarshalCaseSensitivePreserveInts(quoted, &k) != nil {
		return ""
	}
	return k
}

// scanner walks JSON bytes with the Type tree beside it.
type scanner struct {
	data      []byte
	pos       int
	depth     int
	maxDepth  int
	lastCount int // elements of the last array scanned
	res       Result
	// slow turns skip off: set while a value skip stopped in is read
	// value by value.
	slow bool
}

// top checks that the input starts with an object.
func (sc *scanner) top() error {
	sc.skipSpace()
	if sc.pos >= len(sc.data) {
		return errors.New("empty JSON: want an object")
	}
	if c := sc.data[sc.pos]; c != '{' {
		return fmt.Errorf("JSON is %s, not an object", KindOf(c))
	}
	return nil
}

// end checks that nothing but space follows the top-level value.
func (sc *scanner) end() error {
	sc.skipSpace()
	if sc.pos < len(sc.data) {
		return sc.syntax("invalid character %q after the object", sc.data[sc.pos])
	}
	return nil
}

// KindOf names the JSON type that starts with c, for errors: "an object".
func KindOf(c byte) string {
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

func (sc *scanner) syntax(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", sc.pos, fmt.Sprintf(format, args...))
}

func (sc *scanner) unexpectedEnd() error {
	return fmt.Errorf("invalid JSON at offset %d: unexpected end", sc.pos)
}

func (sc *scanner) skipSpace() {
	data, i := sc.data, sc.pos
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	sc.pos = i
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
	sc.res.Depth = max(sc.res.Depth, sc.depth)
	return nil
}

// key scans an object key and the colon after it.
func (sc *scanner) key() (key []byte, escaped bool, err error) {
	sc.skipSpace()
	if sc.peek() != '"' {
		if sc.pos >= len(sc.data) {
			return nil, false, sc.unexpectedEnd()
		}
		return nil, false, sc.syntax("invalid character %q looking for the beginning of an object key", sc.data[sc.pos])
	}
	start := sc.pos
	if escaped, err = sc.string(); err != nil {
		return nil, false, err
	}
	key = sc.data[start+1 : sc.pos-1]
	sc.skipSpace()
	if sc.peek() != ':' {
		if sc.pos >= len(sc.data) {
			return nil, false, sc.unexpectedEnd()
		}
		return nil, false, sc.syntax("invalid character %q after object key", sc.data[sc.pos])
	}
	sc.pos++
	return key, escaped, nil
}

// next scans the comma or the closing bracket after a member or element.
func (sc *scanner) next(closing byte) (done bool, err error) {
	sc.skipSpace()
	switch c := sc.peek(); c {
	case ',':
		sc.pos++
		return false, nil
	case closing:
		sc.pos++
		return true, nil
	case 0:
		return false, sc.unexpectedEnd()
	default:
		return false, sc.syntax("invalid character %q after a value", c)
	}
}

// value scans one JSON value that decodes into n (nil: skipped) and returns
// the bytes decoding allocates beyond the value's own Go storage.
func (sc *scanner) value(n *Type) (int64, error) {
	sc.skipSpace()
	if sc.pos >= len(sc.data) {
		return 0, sc.unexpectedEnd()
	}
	start := sc.pos
	if n != nil && n.Kind == Opaque {
		_, err := sc.value(nil)
		return int64(sc.pos - start), err
	}
	if n == nil && !sc.slow {
		// Nothing inside is estimated: validate it in one loop (skip),
		// and where that stops, again value by value, for the error. The
		// values inside are then all read value by value, so a long
		// input is read at most twice, however deep.
		if sc.skip() {
			return 0, nil
		}
		sc.slow = true
		_, err := sc.typed(nil, start)
		sc.slow = false
		return 0, err
	}
	return sc.typed(n, start)
}

// typed scans the value at pos, which starts at start, into n.
func (sc *scanner) typed(n *Type, start int) (int64, error) {
	switch c := sc.data[sc.pos]; c {
	case '{':
		return sc.object(n)
	case '[':
		return sc.array(n)
	case '"':
		if _, err := sc.string(); err != nil {
			return 0, err
		}
		if n != nil && (n.Kind == String || n.Kind == Bytes) {
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

func (sc *scanner) object(n *Type) (int64, error) {
	if err := sc.enter(); err != nil {
		return 0, err
	}
	sc.pos++ // '{'
	var (
		cost    int64
		seen    [maxStructFields / 64]uint64
		entries int64
	)
	isStruct := n != nil && n.Kind == Struct
	isMap := n != nil && n.Kind == Map
	sc.skipSpace()
	if sc.peek() == '}' {
		sc.pos++
		sc.depth--
		if isMap {
			return mapHeader, nil
		}
		return 0, nil
	}
	for {
		keyStart := sc.pos
		key, escaped, err := sc.key()
		if err != nil {
			return 0, err
		}
		switch {
		case isStruct:
			var f *Field
			if escaped {
				f = n.field([]byte(unescape(key)))
			} else {
				f = n.field(key)
			}
			if f == nil {
				_, err = sc.value(nil)
				break
			}
			word, bit := f.Index/64, uint64(1)<<(f.Index%64)
			if seen[word]&bit != 0 {
				return 0, fmt.Errorf("invalid JSON at offset %d: duplicate field %q", keyStart, key)
			}
			seen[word] |= bit
			var c int64
			c, err = sc.field(f)
			cost += c
		case isMap:
			var c int64
			c, err = sc.value(n.Elem)
			entries++
			cost += int64(len(key)) + c
		default:
			_, err = sc.value(nil)
		}
		if err != nil {
			return 0, err
		}
		done, err := sc.next('}')
		if err != nil {
			return 0, err
		}
		if done {
			break
		}
	}
	sc.depth--
	if isMap {
		cost += MapBytes(n.Elem, int(entries))
	}
	return cost, nil
}

// field scans the value of a struct field, charging a pointer's target and
// recording counts and marks.
func (sc *scanner) field(f *Field) (int64, error) {
	sc.skipSpace()
	start := sc.pos
	c := sc.peek()
	if f.Object && c != '{' && c != 'n' && c != 0 {
		return 0, &NotObjectError{Where: f.Where, Kind: KindOf(c)}
	}
	cost, err := sc.value(f.Type)
	if err != nil {
		return 0, err
	}
	if c == 'n' {
		return 0, nil // null: the field keeps its zero value
	}
	if f.Ptr {
		cost += f.Type.Size
	}
	if f.Mark {
		sc.res.Marked = sc.data[start:sc.pos]
	}
	if f.Count != 0 && c == '[' {
		sc.res.Counts[f.Count] = max(sc.res.Counts[f.Count], sc.lastCount)
	}
	return cost, nil
}

func (sc *scanner) array(n *Type) (int64, error) {
	if err := sc.enter(); err != nil {
		return 0, err
	}
	sc.pos++ // '['
	var elem *Type
	isSlice := n != nil && n.Kind == Slice
	if isSlice {
		elem = n.Elem
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
		if isSlice && n.ElemPtr && !null {
			cost += elem.Size
		}
		done, err := sc.next(']')
		if err != nil {
			return 0, err
		}
		if done {
			break
		}
	}
	sc.depth--
	if isSlice {
		slot := elem.Size
		if n.ElemPtr {
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
	data, i := sc.data, sc.pos+1
	for i < len(data) {
		c := data[i]
		if !special[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			sc.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			i++
			if i >= len(data) {
				sc.pos = i
				return false, sc.unexpectedEnd()
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for range 4 {
					if i >= len(data) {
						sc.pos = i
						return false, sc.unexpectedEnd()
					}
					if !isHex(data[i]) {
						sc.pos = i
						return false, sc.syntax("invalid character %q in \\u escape", data[i])
					}
					i++
				}
			default:
				sc.pos = i
				return false, sc.syntax("invalid escape \\%c in string", data[i])
			}
		default: // a control character
			sc.pos = i
			return false, sc.syntax("invalid control character %q in string", c)
		}
	}
	sc.pos = i
	return false, sc.unexpectedEnd()
}

// special marks the bytes a string scan must look at: the closing quote,
// escapes and control characters.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

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

// NotObjectError reports a field that a Field says is an object (Object)
// but that holds another kind of JSON value.
type NotObjectError struct {
	// Where is the field's path, as Field.Where gives it.
	Where string
	// Kind is what it holds instead, as KindOf names it ("a string").
	Kind string
}

func (e *NotObjectError) Error() string { return e.Where + " is " + e.Kind + ", not an object" }

// maxSkipNesting bounds the nesting skip follows within the value it
// skips; deeper values are read value by value.
const maxSkipNesting = 64 * 16

// skip passes over the value at pos, after space, validating it as
// value(nil) does, in one loop: no call per value, no estimate. It reports
// false, leaving the scanner as it was, where value(nil) would fail (or
// the value nests deeper than maxSkipNesting), so the caller reads it
// again value by value for the error.
func (sc *scanner) skip() bool {
	data := sc.data
	i := sc.pos
	depth := sc.depth
	deepest := sc.res.Depth
	var objects [maxSkipNesting / 64]uint64 // bit set: the level is an object
	level := 0
	for {
		// A value.
		for i < len(data) && isSpace(data[i]) {
			i++
		}
		if i >= len(data) {
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			depth++
			if depth > sc.maxDepth || level == maxSkipNesting {
				return false
			}
			deepest = max(deepest, depth)
			word, bit := level/64, uint64(1)<<(level%64)
			if c == '{' {
				objects[word] |= bit
			} else {
				objects[word] &^= bit
			}
			level++
			i++
			for i < len(data) && isSpace(data[i]) {
				i++
			}
			if i >= len(data) {
				return false
			}
			if c == '{' {
				if data[i] == '}' {
					i++
					level--
					depth--
					break
				}
				if i = skipKey(data, i); i < 0 {
					return false
				}
				continue
			}
			if data[i] == ']' {
				i++
				level--
				depth--
				break
			}
			continue
		case '"':
			if i = skipString(data, i); i < 0 {
				return false
			}
		case 't':
			if i = skipWord(data, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = skipWord(data, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = skipWord(data, i, "null"); i < 0 {
				return false
			}
		default:
			if i = skipNumber(data, i); i < 0 {
				return false
			}
		}
		// After a value: the end of the one skipped, or a comma or the
		// closing bracket of its container.
		for {
			if level == 0 {
				sc.pos = i
				sc.res.Depth = deepest
				return true
			}
			for i < len(data) && isSpace(data[i]) {
				i++
			}
			if i >= len(data) {
				return false
			}
			object := objects[(level-1)/64]&(uint64(1)<<((level-1)%64)) != 0
			c := data[i]
			if c == ',' {
				i++
				if object {
					if i = skipKey(data, i); i < 0 {
						return false
					}
				}
				break
			}
			if (object && c == '}') || (!object && c == ']') {
				i++
				level--
				depth--
				continue
			}
			return false
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// skipKey passes over an object key at i, after space, and the colon
// after it, returning the offset after the colon, or -1.
func skipKey(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = skipString(data, i); i < 0 {
		return -1
	}
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return i + 1
}

// skipString passes over the valid string whose quote is at i, returning
// the offset after its closing quote, or -1.
func skipString(data []byte, i int) int {
	i++
	for i < len(data) {
		c := data[i]
		if !special[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(data)-i < 5 || !isHex(data[i+1]) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) {
					return -1
				}
				i += 5
			default:
				return -1
			}
		default:
			return -1
		}
	}
	return -1
}

func skipWord(data []byte, i int, word string) int {
	if len(data)-i < len(word) || string(data[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// skipNumber passes over the valid number at i, returning the offset
// after it, or -1.
func skipNumber(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i
}
