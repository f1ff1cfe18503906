package psbinding

import (
	"bytes"
	"context"
	"reflect"
	"sync"
	"unicode/utf8"

	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/internal/jsonscan"
	"github.com/bindkit/bindkit/webhook"
)

// objectMeta is the part of a request's object needed to look Bindings up.
type objectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

var objectMetaType = sync.OnceValue(func() *jsonscan.Type {
	return jsonscan.NewBuilder().TypeOf(reflect.TypeFor[objectMeta]())
})

// decodeObjectMeta reads the object's name and labels. It looks for
// metadata among the object's top-level members without decoding or
// copying any, and stops there: the kube-apiserver writes metadata before
// spec, so a request that matches no Binding costs a scan of its metadata,
// not of the whole object. What follows metadata is checked only when a
// Binding matches and the object is decoded in full. The labels' decoded
// size is reserved from the webhook's memory budget before they are
// decoded. Field names match case-sensitively, as in the kube-apiserver.
func decodeObjectMeta(ctx context.Context, raw []byte, maxDepth int) (objectMeta, error) {
	return decodeObjectMetaWith(raw, maxDepth, func(n int64) error { return webhook.Reserve(ctx, n) })
}

// decodeObjectMetaWith is decodeObjectMeta charging reserve. The metadata
// as the kube-apiserver writes it is read, validated and measured in one
// pass (fastObjectMeta); anything else is read by scanObjectMeta, so
// accepted inputs, the charge, the result and the error are scanObjectMeta's
// whatever the input.
func decodeObjectMetaWith(raw []byte, maxDepth int, reserve func(int64) error) (objectMeta, error) {
	if meta, ok, err := fastObjectMeta(raw, maxDepth, reserve); ok {
		return meta, err
	}
	return scanObjectMeta(raw, maxDepth, reserve)
}

// scanObjectMeta finds metadata with jsonscan.Member, scans it again with
// objectMetaType to validate and measure it, reserves what the scan
// estimates, and decodes it with sigs.k8s.io/json: three walks over the
// metadata, which fastObjectMeta replaces with one for the usual input.
func scanObjectMeta(raw []byte, maxDepth int, reserve func(int64) error) (meta objectMeta, err error) {
	metaRaw, err := jsonscan.Member(raw, "metadata", maxDepth)
	if err != nil || metaRaw == nil || string(metaRaw) == "null" {
		return meta, err
	}
	res, err := jsonscan.Scan(metaRaw, objectMetaType(), maxDepth)
	if err != nil {
		return meta, err
	}
	if err := reserve(res.Bytes); err != nil {
		return meta, err
	}
	return meta, kjson.UnmarshalCaseSensitivePreserveInts(metaRaw, &meta)
}

// fastObjectMeta is scanObjectMeta in one pass for the metadata the
// kube-apiserver writes, or reports false for input it leaves to
// scanObjectMeta: any error (so the message is scanObjectMeta's), a key or
// a name or label with escapes, control characters or invalid UTF-8, a
// name or labels given twice or of another type than a string and an
// object of strings, and nesting within two levels of maxDepth.
//
// The pass validates what scanObjectMeta validates: the top-level members
// up to the first metadata, and all of metadata, the members it does not
// read with jsonscan.SkipValue at the depth jsonscan.Member gives them. It
// charges reserve what jsonscan.Scan estimates for objectMetaType (the
// struct, the name's and labels' JSON lengths, jsonscan.MapBytes for the
// map), before it allocates anything.
func fastObjectMeta(raw []byte, maxDepth int, reserve func(int64) error) (meta objectMeta, ok bool, err error) {
	limit := jsonscan.DepthLimit(maxDepth)
	p := metaPass{data: raw}
	if p.peek() != '{' {
		return meta, false, nil
	}
	p.pos++
	if p.peek() == '}' {
		return meta, true, nil // no metadata
	}
	for {
		key, ok := p.key()
		if !ok {
			return meta, false, nil
		}
		if string(key) == "metadata" {
			break
		}
		// depth 1: inside the top-level object, as jsonscan.Member counts.
		if p.pos, err = jsonscan.SkipValue(raw, p.pos, 1, limit); err != nil {
			return meta, false, nil
		}
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			return meta, true, nil // no metadata
		default:
			return meta, false, nil
		}
	}
	switch p.peek() {
	case 'n':
		return meta, p.literal("null"), nil
	case '{':
	default:
		return meta, false, nil
	}
	// metadata is at depth 2, its labels at 3; deeper members are left to
	// SkipValue.
	if limit < 3 {
		return meta, false, nil
	}
	p.pos++
	t := objectMetaType()
	charge := t.Size
	var name, labels []byte // a plain string's content; labels' object
	entries := 0
	if p.peek() != '}' {
		for {
			key, ok := p.key()
			if !ok {
				return meta, false, nil
			}
			switch string(key) {
			case "name":
				if name != nil {
					return meta, false, nil // duplicate: Scan refuses it
				}
				if p.peek() != '"' {
					return meta, false, nil // null too: rare, left to kjson
				}
				if name, ok = p.str(); !ok {
					return meta, false, nil
				}
				charge += int64(len(name)) + 2
			case "labels":
				if labels != nil || p.peek() != '{' {
					return meta, false, nil
				}
				start := p.pos
				p.pos++
				if p.peek() != '}' {
					for {
						k, ok := p.key()
						if !ok || p.peek() != '"' {
							return meta, false, nil
						}
						v, ok := p.str()
						if !ok {
							return meta, false, nil
						}
						entries++
						charge += int64(len(k)) + int64(len(v)) + 2
						if c := p.peek(); c == ',' {
							p.pos++
							continue
						} else if c != '}' {
							return meta, false, nil
						}
						break
					}
				}
				p.pos++
				labels = raw[start:p.pos]
				charge += jsonscan.MapBytes(t.Fields["labels"].Type.Elem, entries)
			default:
				// depth 2: inside metadata.
				if p.pos, err = jsonscan.SkipValue(raw, p.pos, 2, limit); err != nil {
					return meta, false, nil
				}
			}
			if c := p.peek(); c == ',' {
				p.pos++
				continue
			} else if c != '}' {
				return meta, false, nil
			}
			break
		}
	}
	if err := reserve(charge); err != nil {
		return meta, true, err
	}
	if name != nil {
		meta.Name = string(name)
	}
	if labels != nil {
		meta.Labels = readLabels(labels, entries)
	}
	return meta, true, nil
}

// readLabels decodes labels, an object of entries plain strings that
// fastObjectMeta has read: only its quotes matter. Of a key given twice
// the last wins, as in encoding/json.
func readLabels(labels []byte, entries int) map[string]string {
	m := make(map[string]string, entries)
	next := func() string {
		open := bytes.IndexByte(labels, '"')
		n := bytes.IndexByte(labels[open+1:], '"')
		s := labels[open+1 : open+1+n]
		labels = labels[open+n+2:]
		return string(s)
	}
	for range entries {
		k := next()
		m[k] = next()
	}
	return m
}

// metaPass reads the JSON of an object's metadata. Its methods read at pos,
// after any space, and report false for what they leave to
// scanObjectMeta.
type metaPass struct {
	data []byte
	pos  int
}

// key reads a member's key, which must be a plain string, and the colon
// after it.
func (p *metaPass) key() ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	k, ok := p.str()
	if !ok || p.peek() != ':' {
		return nil, false
	}
	p.pos++
	return k, true
}

// str reads a string at pos and returns its content when that is what
// encoding/json decodes it to: no escapes, no control characters (which
// are invalid) and valid UTF-8 (encoding/json replaces what is not).
func (p *metaPass) str() ([]byte, bool) {
	start := p.pos + 1
	ascii := true
	for i := start; i < len(p.data); i++ {
		c := p.data[i]
		switch {
		case c == '"':
			s := p.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.pos = i + 1
			return s, true
		case c < 0x20 || c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *metaPass) literal(word string) bool {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return false
	}
	p.pos += len(word)
	return true
}

// peek returns the next byte after space, 0 at the end.
func (p *metaPass) peek() byte {
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; c {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return c
		}
	}
	return 0
}
