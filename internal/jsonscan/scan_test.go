package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

func TestMember(t *testing.T) {
	tests := []struct {
		name, raw, member, want, wantErr string
	}{
		{name: "found", raw: `{"kind":"x","metadata":{"name":"a"},"spec":{}}`, member: "metadata", want: `{"name":"a"}`},
		{name: "first of two", raw: `{"metadata":1,"metadata":2}`, member: "metadata", want: `1`},
		{name: "absent", raw: `{"kind":"x"}`, member: "metadata"},
		{name: "empty object", raw: ` {} `, member: "metadata"},
		{name: "escaped key", raw: `{"met\u0061data":true}`, member: "metadata", want: `true`},
		{name: "case-sensitive", raw: `{"Metadata":true}`, member: "metadata"},
		{name: "stops at the member", raw: `{"metadata":{},"spec":`, member: "metadata", want: `{}`},
		{name: "malformed before it", raw: `{"spec":[1,}`, member: "metadata", wantErr: `invalid JSON at offset 11: invalid character '}' looking for the beginning of a value`},
		{name: "not an object", raw: `"metadata"`, member: "metadata", wantErr: "JSON is a string, not an object"},
		{name: "too deep before it", raw: `{"a":[[[]]],"metadata":{}}`, member: "metadata", wantErr: "at offset 7: JSON nested too deep: more than 3 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonscan.Member([]byte(tt.raw), tt.member, 3)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Member error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Member = %q, want %q", got, tt.want)
			}
		})
	}
}

type scanned struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Items  []struct {
		A *int `json:"a"`
	} `json:"items"`
	Raw json.RawMessage `json:"raw"`
}

func TestScan(t *testing.T) {
	typ := jsonscan.NewBuilder().TypeOf(reflect.TypeFor[scanned]())
	typ.Fields["items"].Count = 1
	typ.Fields["raw"].Mark = true
	res, err := jsonscan.Scan([]byte(`{"name":"n","labels":{"a":"b"},"items":[{"a":1},{},{"a":null}],"raw":[1,2],"unknown":{"x":[[]]}}`), typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Depth != 4 || res.Counts[1] != 3 || string(res.Marked) != "[1,2]" || res.Bytes <= int64(reflect.TypeFor[scanned]().Size()) {
		t.Errorf("Scan = %+v", res)
	}
	if _, err := jsonscan.Scan([]byte(`{"name":"a","name":"b"}`), typ, 0); err == nil || err.Error() != `invalid JSON at offset 12: duplicate field "name"` {
		t.Errorf("duplicate field: %v", err)
	}
	if _, err := jsonscan.Scan([]byte(`{"labels":{"a":"1","a":"2"}}`), typ, 0); err != nil {
		t.Errorf("duplicate map key: %v, want none (last wins in every decoder)", err)
	}
	if _, err := jsonscan.Scan([]byte(`{"x":[[[[]]]]}`), typ, 3); !errors.Is(err, jsonscan.ErrTooDeep) {
		t.Errorf("too deep: %v, want ErrTooDeep", err)
	}
	// A map bomb is charged far beyond its size.
	bomb := []byte(`{"labels":{`)
	for i := range 1000 {
		if i > 0 {
			bomb = append(bomb, ',')
		}
		bomb = append(bomb, []byte(`"`+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))+`":""`)...)
	}
	bomb = append(bomb, "}}"...)
	res, err = jsonscan.Scan(bomb, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes < 5*int64(len(bomb)) {
		t.Errorf("a map of 1,000 entries in %d bytes is charged %d", len(bomb), res.Bytes)
	}
}

// FuzzMember checks Member against encoding/json on objects without
// duplicate keys.
func FuzzMember(f *testing.F) {
	f.Add([]byte(`{"kind":"x","metadata":{"name":"a"},"spec":{}}`))
	f.Add([]byte(`{"metadata":null}`))
	f.Add([]byte(`{"a":"\u006d","metadata":[1,2.5e3,"x\n"]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := jsonscan.Member(raw, "metadata", 0)
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return // invalid or not an object: Member may fail or stop early
		}
		if err != nil {
			t.Fatalf("Member failed on a valid object: %v: %q", err, raw)
		}
		want, ok := m["metadata"]
		if !ok {
			if got != nil {
				t.Fatalf("Member = %q for an object without metadata", got)
			}
			return
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
			t.Fatalf("Member = %q, not a JSON value", got)
		}
		if !hasDuplicateMetadata(raw) && !cmp.Equal(a, b) {
			t.Fatalf("Member = %s, encoding/json says %s", got, want)
		}
	})
}

// hasDuplicateMetadata reports whether raw may hold metadata twice, where
// Member takes the first and encoding/json the last.
func hasDuplicateMetadata(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return true
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		if tok == "metadata" {
			n++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return true
		}
	}
	return n > 1
}

// TestScanStrings puts each byte a string scan must see (quote, backslash
// escapes, control characters, bytes beyond ASCII) at each position of
// strings longer than the eight bytes the scan skips at a time, and checks
// that Scan accepts what encoding/json accepts.
func TestScanStrings(t *testing.T) {
	typ := jsonscan.NewBuilder().TypeOf(reflect.TypeFor[scanned]())
	inserts := []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\x`, "\x00", "\x1f", "\t", "\x7f", "é", "\xff", " ", `\`, `\u12`}
	for _, ins := range inserts {
		for at := range 20 {
			for _, total := range []int{at, at + 1, 8, 16, 23} {
				if total < at {
					continue
				}
				str := strings.Repeat("a", at) + ins + strings.Repeat("b", total-at)
				raw := []byte(`{"name":"` + str + `","raw":"` + str + `"}`)
				_, err := jsonscan.Scan(raw, typ, 0)
				if valid := json.Valid(raw); valid != (err == nil) {
					t.Errorf("Scan(%q): %v, json.Valid %v", raw, err, valid)
				}
			}
		}
	}
}

func TestSkipValue(t *testing.T) {
	tests := []struct {
		name, data string
		pos, depth int
		want       int
		wantErr    string
	}{
		{name: "string", data: `{"a":"x\"y","b":1}`, pos: 5, depth: 1, want: 11},
		{name: "space before", data: `{"a":  [1, {"b": null}] }`, pos: 5, depth: 1, want: 23},
		{name: "number", data: `{"a":-1.5e3}`, pos: 5, depth: 1, want: 11},
		{name: "literal", data: `[true]`, pos: 1, depth: 1, want: 5},
		{name: "at the limit", data: `{"a":[[]]}`, pos: 5, depth: 1, want: 9},
		{name: "past the limit", data: `{"a":[[[]]]}`, pos: 5, depth: 1, wantErr: "at offset 7: JSON nested too deep: more than 3 levels"},
		{name: "depth counts", data: `{"a":[[]]}`, pos: 5, depth: 2, wantErr: "at offset 6: JSON nested too deep: more than 3 levels"},
		{name: "malformed", data: `{"a":[1,]}`, pos: 5, depth: 1, wantErr: `invalid JSON at offset 8: invalid character ']' looking for the beginning of a value`},
		{name: "bad escape", data: `{"a":"\x"}`, pos: 5, depth: 1, wantErr: `invalid JSON at offset 7: invalid escape \x in string`},
		{name: "end", data: `{"a":`, pos: 5, depth: 1, wantErr: "invalid JSON at offset 5: unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonscan.SkipValue([]byte(tt.data), tt.pos, tt.depth, 3)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("SkipValue error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("SkipValue = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestMapBytes checks that MapBytes is what Scan charges for a map, its
// entries' own bytes aside.
func TestMapBytes(t *testing.T) {
	typ := jsonscan.NewBuilder().TypeOf(reflect.TypeFor[map[string]string]())
	for _, n := range []int{0, 1, 8, 9, 100} {
		var b strings.Builder
		b.WriteByte('{')
		own := int64(0)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			k := strings.Repeat("k", i+1)
			b.WriteString(`"` + k + `":"v"`)
			own += int64(len(k)) + 3
		}
		b.WriteByte('}')
		res, err := jsonscan.Scan([]byte(b.String()), typ, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonscan.MapBytes(typ.Elem, n)+own+typ.Size, res.Bytes; got != want {
			t.Errorf("%d entries: MapBytes gives %d in all, Scan charges %d", n, got, want)
		}
	}
	if got, want := jsonscan.DepthLimit(0), jsonscan.MaxDepth; got != want {
		t.Errorf("DepthLimit(0) = %d, want %d", got, want)
	}
	if got, want := jsonscan.DepthLimit(7), 7; got != want {
		t.Errorf("DepthLimit(7) = %d, want %d", got, want)
	}
}
