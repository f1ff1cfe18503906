package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// decodeReview decodes body into an AdmissionReview exactly as
// kjson.UnmarshalCaseSensitivePreserveInts does (field names match
// case-sensitively, unknown fields are ignored, of a key given twice the
// last wins), for a body jsonscan.Scan has already found to be one valid
// JSON object: decoding it again with encoding/json would validate all of it
// a second time and walk the objects a third.
//
// The review as the kube-apiserver sends it is read in one pass by
// fastReview; whatever that pass does not handle (a value of the wrong
// type, a key or string with escapes, a response) is decoded by kjson, so
// the result and the error are kjson's whatever the input.
//
// object, when not nil, is the JSON of request.object as the scan found it
// (jsonscan.Result.Marked, a sub-slice of body): the one pass steps over it
// instead of walking it again.
func decodeReview(body, object []byte) (*admissionv1.AdmissionReview, error) {
	if review, ok := fastReview(body, object); ok {
		return review, nil
	}
	review := new(admissionv1.AdmissionReview)
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, review); err != nil {
		return nil, err
	}
	return review, nil
}

// fastReview decodes body, one valid JSON object, into a review, or
// reports false when it meets what it leaves to kjson. It does not
// validate: on invalid JSON it may return a review kjson would refuse, but
// it never panics. The raw objects (object, oldObject, options) are
// sub-slices of body, capped so that appending to one copies it. object is
// as decodeReview's.
func fastReview(body, object []byte) (*admissionv1.AdmissionReview, bool) {
	d := reviewDecoder{data: body, known: object}
	d.shareStrings()
	// The review and its request in one allocation: a review decoded here
	// has a request nearly always.
	both := new(struct {
		review  admissionv1.AdmissionReview
		request admissionv1.AdmissionRequest
	})
	review := &both.review
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "apiVersion":
			return d.str(&review.APIVersion)
		case "kind":
			return d.str(&review.Kind)
		case "request":
			if d.takeNull() {
				review.Request = nil
				return true
			}
			if review.Request == nil {
				review.Request = &both.request
			}
			return d.request(review.Request)
		case "response":
			if d.takeNull() {
				review.Response = nil
				return true
			}
			return false // never sent to a webhook: kjson's
		}
		return d.skip()
	})
	if !ok {
		return nil, false
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, false
	}
	return review, true
}

// reviewDecoder reads the JSON of a review. Its methods read one value at
// pos, after any space, and leave pos after it; they report false for what
// they do not handle, leaving pos anywhere.
type reviewDecoder struct {
	data  []byte
	pos   int
	known []byte // a value of data already scanned: skip steps over it
	// shared is data[:len(shared)] as one string: the plain strings within
	// it are taken as substrings of it, not allocated one by one.
	shared string
}

// maxSharedStrings bounds the part of a review whose strings share one
// allocation: the envelope and the request's small fields, which come
// before request.object as the kube-apiserver writes a review, fit in it
// many times over, and a review whose object comes after some other large
// value does not keep a large copy alive for a few short strings.
const maxSharedStrings = 4 << 10

// shareStrings copies the part of data before the scanned object (known),
// up to maxSharedStrings, into one string for str to take substrings of:
// one allocation for the dozen short strings of a request instead of one
// each. Without a known object, or with a larger prefix, every string is
// its own.
func (d *reviewDecoder) shareStrings() {
	if len(d.known) == 0 {
		return
	}
	end := cap(d.data) - cap(d.known) // where known starts in data
	if end <= 0 || end > len(d.data) || end > maxSharedStrings {
		return
	}
	d.shared = string(d.data[:end])
}

func (d *reviewDecoder) request(req *admissionv1.AdmissionRequest) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "uid":
			return d.str((*string)(&req.UID))
		case "kind":
			return d.gvk(&req.Kind)
		case "resource":
			return d.gvr(&req.Resource)
		case "subResource":
			return d.str(&req.SubResource)
		case "requestKind":
			if d.takeNull() {
				req.RequestKind = nil
				return true
			}
			if req.RequestKind == nil {
				req.RequestKind = new(metav1.GroupVersionKind)
			}
			return d.gvk(req.RequestKind)
		case "requestResource":
			if d.takeNull() {
				req.RequestResource = nil
				return true
			}
			if req.RequestResource == nil {
				req.RequestResource = new(metav1.GroupVersionResource)
			}
			return d.gvr(req.RequestResource)
		case "requestSubResource":
			return d.str(&req.RequestSubResource)
		case "name":
			return d.str(&req.Name)
		case "namespace":
			return d.str(&req.Namespace)
		case "operation":
			return d.str((*string)(&req.Operation))
		case "userInfo":
			return d.userInfo(&req.UserInfo)
		case "object":
			return d.raw(&req.Object)
		case "oldObject":
			return d.raw(&req.OldObject)
		case "dryRun":
			return d.boolPtr(&req.DryRun)
		case "options":
			return d.raw(&req.Options)
		}
		return d.skip()
	})
}

// gvk decodes into a struct: null leaves it as it is, members merge.
func (d *reviewDecoder) gvk(g *metav1.GroupVersionKind) bool {
	if d.takeNull() {
		return true
	}
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "group":
			return d.str(&g.Group)
		case "version":
			return d.str(&g.Version)
		case "kind":
			return d.str(&g.Kind)
		}
		return d.skip()
	})
}

func (d *reviewDecoder) gvr(g *metav1.GroupVersionResource) bool {
	if d.takeNull() {
		return true
	}
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "group":
			return d.str(&g.Group)
		case "version":
			return d.str(&g.Version)
		case "resource":
			return d.str(&g.Resource)
		}
		return d.skip()
	})
}

func (d *reviewDecoder) userInfo(u *authenticationv1.UserInfo) bool {
	if d.takeNull() {
		return true
	}
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "username":
			return d.str(&u.Username)
		case "uid":
			return d.str(&u.UID)
		case "groups":
			return d.strings(&u.Groups)
		case "extra":
			return d.extra(&u.Extra)
		}
		return d.skip()
	})
}

// strings decodes a list of strings as encoding/json does: null makes it
// nil, [] an empty list, a null element "".
func (d *reviewDecoder) strings(dst *[]string) bool {
	switch d.peek() {
	case 'n':
		*dst = nil
		return d.null()
	case '[':
	default:
		return false
	}
	d.pos++
	if d.peek() == ']' {
		d.pos++
		*dst = []string{}
		return true
	}
	// Room for the groups of most users at once, rather than growing
	// through one, two and four.
	list := make([]string, 0, 4)
	for {
		// Decoded in place: a string variable here would escape to the
		// heap, through kjson, once for each element.
		list = append(list, "")
		if !d.str(&list[len(list)-1]) {
			return false
		}
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			*dst = list
			return true
		default:
			return false
		}
	}
}

// extra decodes userInfo.extra as encoding/json does: null makes it nil,
// an object adds to the map (made if nil), the last of a key given twice
// wins.
func (d *reviewDecoder) extra(dst *map[string]authenticationv1.ExtraValue) bool {
	switch d.peek() {
	case 'n':
		*dst = nil
		return d.null()
	case '{':
	default:
		return false
	}
	if *dst == nil {
		*dst = map[string]authenticationv1.ExtraValue{}
	}
	m := *dst
	return d.object(func(key []byte) bool {
		var v []string
		if !d.strings(&v) {
			return false
		}
		m[string(key)] = v
		return true
	})
}

// raw takes a value as runtime.RawExtension.UnmarshalJSON does: null
// leaves it as it is, any other value is its JSON.
func (d *reviewDecoder) raw(r *runtime.RawExtension) bool {
	if d.takeNull() {
		return true
	}
	start := d.pos
	if !d.skip() {
		return false
	}
	r.Raw = d.data[start:d.pos:d.pos]
	return true
}

// boolPtr decodes a *bool: null makes it nil.
func (d *reviewDecoder) boolPtr(dst **bool) bool {
	var v bool
	switch d.peek() {
	case 'n':
		*dst = nil
		return d.null()
	case 't':
		v = true
		if !d.literal("true") {
			return false
		}
	case 'f':
		if !d.literal("false") {
			return false
		}
	default:
		return false
	}
	if *dst == nil {
		*dst = new(bool)
	}
	**dst = v
	return true
}

// str decodes a string: null leaves it as it is. A string with escapes,
// or bytes that are not ASCII (encoding/json replaces invalid UTF-8), is
// unquoted by kjson.
func (d *reviewDecoder) str(dst *string) bool {
	switch d.peek() {
	case 'n':
		return d.null()
	case '"':
	default:
		return false
	}
	start := d.pos
	i := start + 1
	plain := true
	for ; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return false
		}
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		if i >= len(d.data) {
			return false
		}
		if i <= len(d.shared) {
			*dst = d.shared[start+1 : i]
		} else {
			*dst = string(d.data[start+1 : i])
		}
		d.pos = i + 1
		return true
	}
	if !d.skipString() {
		return false
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(d.data[start:d.pos], dst) == nil
}

// object calls member for each member of the object at pos, with pos at
// the member's value; member must read the value. Keys with escapes are
// left to kjson.
func (d *reviewDecoder) object(member func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.pos++
	if d.peek() == '}' {
		d.pos++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		start := d.pos + 1
		n := bytes.IndexByte(d.data[start:], '"')
		if n < 0 {
			return false
		}
		key := d.data[start : start+n]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			return false
		}
		d.pos = start + n + 1
		if d.peek() != ':' {
			return false
		}
		d.pos++
		d.space()
		if !member(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return true
		default:
			return false
		}
	}
}

// skip passes over one value without validating it: jsonscan has.
func (d *reviewDecoder) skip() bool {
	c := d.peek()
	// known is a sub-slice of data: it starts here when the capacities
	// left agree.
	if len(d.known) > 0 && cap(d.data)-cap(d.known) == d.pos && d.pos+len(d.known) <= len(d.data) {
		d.pos += len(d.known)
		return true
	}
	switch c {
	case '"':
		return d.skipString()
	case '{', '[':
		depth := 0
		data := d.data
		for i := d.pos; i < len(data); {
			switch structural[data[i]] {
			case 0:
				i++
			case '"':
				d.pos = i
				if !d.skipString() {
					return false
				}
				i = d.pos
			case '{':
				depth++
				i++
			case '}':
				depth--
				i++
				if depth == 0 {
					d.pos = i
					return true
				}
			}
		}
		return false
	case 0:
		return false
	default: // a number or literal
		start := d.pos
		for d.pos < len(d.data) && structural[d.data[d.pos]] == 0 && !isSpace(d.data[d.pos]) && d.data[d.pos] != ',' && d.data[d.pos] != ':' {
			d.pos++
		}
		return d.pos > start
	}
}

// structural maps the bytes a skip looks at: quotes, and brackets as '{'
// (opening) or '}' (closing).
var structural = func() (t [256]byte) {
	t['"'] = '"'
	t['{'], t['['] = '{', '{'
	t['}'], t[']'] = '}', '}'
	return t
}()

// skipString passes over the string at pos.
func (d *reviewDecoder) skipString() bool {
	data := d.data
	i := d.pos + 1
	for {
		n := bytes.IndexByte(data[i:], '"')
		if n < 0 {
			return false
		}
		i += n
		// Escaped when an odd number of backslashes precede it.
		bs := 0
		for j := i - 1; j > d.pos && data[j] == '\\'; j-- {
			bs++
		}
		i++
		if bs%2 == 0 {
			d.pos = i
			return true
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *reviewDecoder) space() {
	for d.pos < len(d.data) && isSpace(d.data[d.pos]) {
		d.pos++
	}
}

// peek returns the next byte after space, 0 at the end.
func (d *reviewDecoder) peek() byte {
	d.space()
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// takeNull reads a null at pos, reporting whether there was one.
func (d *reviewDecoder) takeNull() bool { return d.peek() == 'n' && d.null() }

func (d *reviewDecoder) null() bool { return d.literal("null") }

func (d *reviewDecoder) literal(word string) bool {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(word)) {
		return false
	}
	d.pos += len(word)
	return true
}

// encodeReview appends to dst json.Marshal of the AdmissionReview
// answering with resp, byte for byte, for the answers controllers give (no
// status, audit annotations or warnings, and strings that encoding/json
// writes as they are), and returns the extended buffer; others are left
// to json.Marshal, whose result it returns without touching dst.
func encodeReview(dst []byte, tm metav1.TypeMeta, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	if resp.Result != nil || len(resp.AuditAnnotations) > 0 || len(resp.Warnings) > 0 ||
		!plainJSON(tm.Kind) || !plainJSON(tm.APIVersion) || !plainJSON(string(resp.UID)) ||
		(resp.PatchType != nil && !plainJSON(string(*resp.PatchType))) {
		return json.Marshal(&admissionv1.AdmissionReview{TypeMeta: tm, Response: resp})
	}
	b := slices.Grow(dst, 128+len(tm.Kind)+len(tm.APIVersion)+len(resp.UID)+base64.StdEncoding.EncodedLen(len(resp.Patch)))
	b = append(b, '{')
	// TypeMeta's fields are omitempty.
	if tm.Kind != "" {
		b = append(append(append(b, `"kind":"`...), tm.Kind...), `",`...)
	}
	if tm.APIVersion != "" {
		b = append(append(append(b, `"apiVersion":"`...), tm.APIVersion...), `",`...)
	}
	b = append(append(append(b, `"response":{"uid":"`...), resp.UID...), `","allowed":`...)
	b = strconv.AppendBool(b, resp.Allowed)
	if len(resp.Patch) > 0 {
		b = append(b, `,"patch":"`...)
		b = base64.StdEncoding.AppendEncode(b, resp.Patch)
		b = append(b, '"')
	}
	if resp.PatchType != nil {
		b = append(append(append(b, `,"patchType":"`...), *resp.PatchType...), '"')
	}
	return append(b, "}}"...), nil
}

// plainJSON reports whether encoding/json writes s between quotes as it
// is: printable ASCII without quotes, backslashes or the HTML characters it
// escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
