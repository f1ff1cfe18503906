package jsonscan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzSkip compares skip, the one-loop validation of a value nothing is
// estimated for, with reading it value by value: skip takes exactly the
// values that read succeeds on, ends where it ends and records the same
// depth; and value, which tries skip first, fails with the same error.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-2.5e+3,0.0,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"],"b":{},"c":[],"d":{"e":[{}]}}`,
		` [ 1 , { "a" : [ ] } ] `,
		`"str"`, `-0`, `1e5`, `01`, `1.`, `-`, `tru`, `nul`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
		`[[[[[]]]]]`, `{"a":{"b":{"c":{}}}}`, "\"\x01\"", `"\u12G4"`, `"\x"`, `[1 2]`, `{"a":1]`, `[}`, ``,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxDepth uint8) {
		md := depthLimit(int(maxDepth))
		slow := scanner{data: data, maxDepth: md, depth: 1, slow: true}
		_, slowErr := slow.value(nil)

		fast := scanner{data: data, maxDepth: md, depth: 1}
		fast.skipSpace()
		ok := fast.pos < len(data) && fast.skip()
		tooDeepToSkip := slowErr == nil && slow.res.Depth-1 > maxSkipNesting
		if ok != (slowErr == nil) && !tooDeepToSkip {
			t.Fatalf("skip(%q) = %v, reading value by value: %v", data, ok, slowErr)
		}
		if ok && (fast.pos != slow.pos || fast.res.Depth != slow.res.Depth || fast.depth != 1) {
			t.Fatalf("skip(%q) ends at %d with depth %d (%d), reading value by value at %d with depth %d",
				data, fast.pos, fast.res.Depth, fast.depth, slow.pos, slow.res.Depth)
		}

		both := scanner{data: data, maxDepth: md, depth: 1}
		_, err := both.value(nil)
		if fmt.Sprint(err) != fmt.Sprint(slowErr) {
			t.Fatalf("value(%q): %v, reading value by value: %v", data, err, slowErr)
		}
		if err == nil && (both.pos != slow.pos || both.res.Depth != slow.res.Depth) {
			t.Fatalf("value(%q) ends at %d with depth %d, reading value by value at %d with depth %d",
				data, both.pos, both.res.Depth, slow.pos, slow.res.Depth)
		}
	})
}

// TestSkipDeep checks that a value nested deeper than skip follows is read
// value by value, to the same end and depth, and that one nested deeper
// than the limit fails as it did.
func TestSkipDeep(t *testing.T) {
	for _, n := range []int{maxSkipNesting, maxSkipNesting + 1, 3000} {
		data := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		sc := scanner{data: data, maxDepth: MaxDepth}
		if _, err := sc.value(nil); err != nil {
			t.Fatalf("%d deep: %v", n, err)
		}
		if sc.pos != len(data) || sc.res.Depth != n {
			t.Errorf("%d deep: ends at %d with depth %d, want %d and %d", n, sc.pos, sc.res.Depth, len(data), n)
		}
		sc = scanner{data: data, maxDepth: n - 1}
		if _, err := sc.value(nil); err == nil || !errors.Is(err, ErrTooDeep) {
			t.Errorf("%d deep, limit %d: error %v, want ErrTooDeep", n, n-1, err)
		}
	}
}
