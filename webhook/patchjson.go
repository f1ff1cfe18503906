package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"gomodules.xyz/jsonpatch/v2"
)

// encodePatch returns the JSON patch document for ops, byte for byte what
// json.Marshal(ops) returns (jsonpatch.Operation's MarshalJSON: a nil Value
// is written as null for add and replace and left out otherwise). A value
// encoding/json cannot encode is an error naming the operation.
//
// encoding/json would marshal each operation into a buffer of its own
// through Operation.MarshalJSON and then scan that output again to compact
// it; this writes the members in place and only the values go through
// encoding/json, into one buffer. Strings that need escaping are written
// by encoding/json too, so the escaping stays its own.
func encodePatch(ops []jsonpatch.JsonPatchOperation) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(128 * len(ops))
	enc := json.NewEncoder(&buf) // escapes HTML, as json.Marshal does
	buf.WriteByte('[')
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":`)
		if err := writeString(&buf, enc, op.Operation); err != nil {
			return nil, err
		}
		buf.WriteString(`,"path":`)
		if err := writeString(&buf, enc, op.Path); err != nil {
			return nil, err
		}
		if op.Value != nil || op.Operation == "add" || op.Operation == "replace" {
			buf.WriteString(`,"value":`)
			if err := writeValue(&buf, enc, op.Value); err != nil {
				return nil, fmt.Errorf("operation %d (%s %s): %w", i, op.Operation, op.Path, err)
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// writeValue writes v as encoding/json does, without the newline
// json.Encoder ends each value with.
func writeValue(buf *bytes.Buffer, enc *json.Encoder, v any) error {
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1)
	return nil
}

// writeString writes s as a JSON string. A string of printable ASCII that
// encoding/json would not escape (no quote, backslash, <, > or &) is
// written as it is; any other goes through encoding/json.
func writeString(buf *bytes.Buffer, enc *json.Encoder, s string) error {
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return writeValue(buf, enc, s)
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}
