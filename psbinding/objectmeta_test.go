package psbinding

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/test/fixtures"
)

// apiserverObject is a Deployment's metadata as the kube-apiserver sends
// it in an admission request: server-set fields, managed fields, owner
// references and finalizers around the name and labels.
const apiserverObject = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{` +
	`"name":"web","generateName":"web-","namespace":"default","uid":"0b8bd0f0-3c2e-4a55-9f5d-0b1a52b7c1de",` +
	`"resourceVersion":"1234","generation":3,"creationTimestamp":"2026-11-25T10:00:00Z","deletionTimestamp":null,` +
	`"labels":{"app":"web","app.kubernetes.io/name":"web","tier":"backend"},` +
	`"annotations":{"deployment.kubernetes.io/revision":"2","note":"a \"quoted\" {value}\n"},` +
	`"ownerReferences":[{"apiVersion":"v1","kind":"Owner","name":"o","uid":"u","controller":true,"blockOwnerDeletion":false}],` +
	`"finalizers":["example.com/f"],` +
	`"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1","time":"2026-11-25T10:00:00Z","fieldsType":"FieldsV1",` +
	`"fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}}}}]` +
	`},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"app","image":"nginx"}]}}},"status":{}}`

// objectMetaCases are objects, the depth limit they are read with, and
// whether the one pass reads them (wantFast) or leaves them to
// scanObjectMeta. Each is a seed of FuzzDecodeObjectMeta in
// testdata/fuzz/FuzzDecodeObjectMeta too.
var objectMetaCases = []struct {
	name     string
	raw      string
	maxDepth int
	wantFast bool
}{
	{"as the kube-apiserver sends it", apiserverObject, 100, true},
	{"as the kube-apiserver sends it, no depth limit", apiserverObject, 0, true},
	{"spaces everywhere", " {\n\t\"kind\" : \"x\" ,\r\n \"metadata\" : { \"name\" : \"a\" , \"labels\" : { \"k\" : \"v\" , \"k2\" : \"\" } , \"x\" : [ 1 , { } ] } , \"spec\" : { } } ", 100, true},
	{"no metadata", `{"kind":"x","spec":{"a":[1,2.5e3,-0,true,false,null,"\\"]}}`, 100, true},
	{"empty object", ` {} `, 100, true},
	{"null metadata", `{"metadata":null,"spec":{}}`, 100, true},
	{"empty metadata", `{"metadata":{}}`, 100, true},
	{"empty labels", `{"metadata":{"labels":{}}}`, 100, true},
	{"empty name", `{"metadata":{"name":""}}`, 100, true},
	{"label given twice", `{"metadata":{"labels":{"k":"a","k":"b","j":"c"}}}`, 100, true},
	{"nine labels", `{"metadata":{"labels":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}}}`, 100, true},
	{"non-ASCII", `{"metadata":{"name":"é","labels":{"ключ":"значение"}}}`, 100, true},
	{"metadata after spec", `{"spec":{"template":{"metadata":{"name":"inner"}}},"metadata":{"name":"outer"}}`, 100, true},
	{"second metadata ignored", `{"metadata":{"name":"a"},"metadata":5}`, 100, true},
	{"after metadata unread", `{"metadata":{"name":"a"},"spec":`, 100, true},
	{"case-sensitive", `{"Metadata":{"name":"no"},"metadata":{"Name":"no","Labels":{"a":"b"},"name":"yes"}}`, 100, true},
	{"labels at the depth limit", `{"metadata":{"labels":{"a":"b"}}}`, 3, true},
	{"member at the depth limit", `{"a":[[]],"metadata":{"b":[],"name":"x"}}`, 3, true},
	// What the one pass leaves to scanObjectMeta.
	{"escaped top-level key", `{"met\u0061data":{"name":"a"}}`, 100, false},
	{"escaped metadata key", `{"metadata":{"n\u0061me":"a"}}`, 100, false},
	{"escaped name", `{"metadata":{"name":"a\"b"}}`, 100, false},
	{"escaped label", `{"metadata":{"labels":{"k":"\u0076"}}}`, 100, false},
	{"invalid UTF-8 label", "{\"metadata\":{\"labels\":{\"k\":\"a\xffb\"}}}", 100, false},
	{"null name", `{"metadata":{"name":null}}`, 100, false},
	{"null labels", `{"metadata":{"labels":null}}`, 100, false},
	{"null label", `{"metadata":{"labels":{"k":null}}}`, 100, false},
	{"number name", `{"metadata":{"name":7}}`, 100, false},
	{"list labels", `{"metadata":{"labels":["a"]}}`, 100, false},
	{"number label", `{"metadata":{"labels":{"k":1}}}`, 100, false},
	{"name given twice", `{"metadata":{"name":"a","name":"b"}}`, 100, false},
	{"labels given twice", `{"metadata":{"labels":{},"labels":{"a":"b"}}}`, 100, false},
	{"string metadata", `{"metadata":"x"}`, 100, false},
	{"list", `[]`, 100, false},
	{"empty", ``, 100, false},
	{"malformed before metadata", `{"spec":[1,],"metadata":{}}`, 100, false},
	{"malformed metadata", `{"metadata":{"name":"a",}}`, 100, false},
	{"malformed member of metadata", `{"metadata":{"x":[1 2],"name":"a"}}`, 100, false},
	{"control character", "{\"metadata\":{\"name\":\"a\tb\"}}", 100, false},
	{"too deep before metadata", `{"a":[[[]]],"metadata":{}}`, 3, false},
	{"too deep in metadata", `{"metadata":{"a":[[]]}}`, 3, false},
	{"labels past the depth limit", `{"metadata":{"labels":{"a":"b"}}}`, 2, false},
	{"truncated", `{"metadata":{"name":"a"`, 100, false},
}

// TestDecodeObjectMeta checks that decodeObjectMeta decodes, charges and
// fails as scanObjectMeta (jsonscan.Member, jsonscan.Scan, kjson) does, and
// that the one pass takes what the kube-apiserver sends.
func TestDecodeObjectMeta(t *testing.T) {
	realistic, err := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	if err != nil {
		t.Fatal(err)
	}
	cases := append(objectMetaCases[:len(objectMetaCases):len(objectMetaCases)], struct {
		name     string
		raw      string
		maxDepth int
		wantFast bool
	}{"fixtures.RealisticDeployment", string(realistic), 100, true})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, fast, _ := fastObjectMeta([]byte(tc.raw), tc.maxDepth, func(int64) error { return nil })
			if fast != tc.wantFast {
				t.Errorf("one pass took it: %v, want %v", fast, tc.wantFast)
			}
			checkDecodeObjectMeta(t, []byte(tc.raw), tc.maxDepth, 0)
		})
	}
}

// TestDecodeObjectMetaValues pins what a few objects decode to, so that
// the comparison with scanObjectMeta is not between two wrong answers.
func TestDecodeObjectMetaValues(t *testing.T) {
	cases := []struct {
		raw        string
		want       objectMeta
		wantCharge int64
	}{
		{`{"metadata":{"name":"web","labels":{"app":"web"}}}`, objectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			// objectMeta, "web" quoted, "app" and "web" quoted, a map of eight slots.
			24 + 5 + 3 + 5 + 64 + 2*8*(16+16+8)},
		{apiserverObject, objectMeta{Name: "web", Labels: map[string]string{"app": "web", "app.kubernetes.io/name": "web", "tier": "backend"}},
			24 + 5 + (3 + 5) + (22 + 5) + (4 + 9) + 64 + 2*8*(16+16+8)},
		{`{"metadata":{"labels":{}}}`, objectMeta{Labels: map[string]string{}}, 24 + 64},
		{`{"metadata":null}`, objectMeta{}, 0},
	}
	for _, tc := range cases {
		var charged int64
		got, err := decodeObjectMetaWith([]byte(tc.raw), 100, func(n int64) error { charged += n; return nil })
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.raw, diff)
		}
		if charged != tc.wantCharge {
			t.Errorf("%s: charged %d, want %d", tc.raw, charged, tc.wantCharge)
		}
	}
}

// TestDecodeObjectMetaOverBudget checks that a charge refused is the
// error, before anything is decoded, on both paths.
func TestDecodeObjectMetaOverBudget(t *testing.T) {
	for _, raw := range []string{apiserverObject, `{"metadata":{"name":null,"labels":{"a":"b"}}}`} {
		checkDecodeObjectMeta(t, []byte(raw), 100, 100)
		meta, err := decodeObjectMetaWith([]byte(raw), 100, func(n int64) error { return fmt.Errorf("over budget: %d", n) })
		if err == nil || !strings.HasPrefix(err.Error(), "over budget") {
			t.Errorf("%s: error %v, want the reservation's", raw, err)
		}
		if diff := cmp.Diff(objectMeta{}, meta); diff != "" {
			t.Errorf("%s: decoded over budget (-want +got):\n%s", raw, diff)
		}
	}
}

// FuzzDecodeObjectMeta compares decodeObjectMeta, and the one pass alone,
// with scanObjectMeta (jsonscan.Member, jsonscan.Scan, kjson) on any
// object, depth limit and memory budget (0: none): the same result, the
// same charges and the same error. Seeds live in
// testdata/fuzz/FuzzDecodeObjectMeta.
func FuzzDecodeObjectMeta(f *testing.F) {
	for _, tc := range objectMetaCases {
		f.Add([]byte(tc.raw), uint8(tc.maxDepth), int64(0))
	}
	f.Add([]byte(apiserverObject), uint8(100), int64(500))
	f.Fuzz(func(t *testing.T, raw []byte, maxDepth uint8, budget int64) {
		checkDecodeObjectMeta(t, raw, int(maxDepth), budget)
	})
}

// checkDecodeObjectMeta fails t unless decodeObjectMetaWith, and
// fastObjectMeta when it takes raw, agree with scanObjectMeta on raw: the
// result, the error, and what each charged, with charges beyond budget
// (0: none) refused.
func checkDecodeObjectMeta(t *testing.T, raw []byte, maxDepth int, budget int64) {
	t.Helper()
	recorder := func(charges *[]int64) func(int64) error {
		return func(n int64) error {
			*charges = append(*charges, n)
			if budget > 0 && n > budget {
				return errors.New("over budget")
			}
			return nil
		}
	}
	var wantCharges, gotCharges, fastCharges []int64
	want, wantErr := scanObjectMeta(raw, maxDepth, recorder(&wantCharges))
	got, err := decodeObjectMetaWith(raw, maxDepth, recorder(&gotCharges))
	compare := func(what string, got objectMeta, err error, charges []int64) {
		t.Helper()
		switch {
		case wantErr != nil && err == nil:
			t.Fatalf("%s decoded %q, want the error %v", what, raw, wantErr)
		case wantErr == nil && err != nil:
			t.Fatalf("%s: error %v on %q, which scanObjectMeta decodes", what, err, raw)
		case wantErr != nil && err.Error() != wantErr.Error():
			t.Fatalf("%s: error %v on %q, want %v", what, err, raw, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s(%q) (-scanObjectMeta +got):\n%s", what, raw, diff)
		}
		if diff := cmp.Diff(wantCharges, charges); diff != "" {
			t.Fatalf("%s(%q) charges (-scanObjectMeta +got):\n%s", what, raw, diff)
		}
	}
	compare("decodeObjectMeta", got, err, gotCharges)
	fast, ok, err := fastObjectMeta(raw, maxDepth, recorder(&fastCharges))
	if ok {
		compare("fastObjectMeta", fast, err, fastCharges)
	}
}

// BenchmarkDecodeObjectMeta compares the one pass with the walks it
// replaces (scanObjectMeta) on fixtures.RealisticDeployment and on the
// metadata the kube-apiserver sends (apiserverObject).
func BenchmarkDecodeObjectMeta(b *testing.B) {
	realistic, err := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	if err != nil {
		b.Fatal(err)
	}
	reserve := func(int64) error { return nil }
	for _, obj := range []struct {
		name string
		raw  []byte
	}{{"realistic", realistic}, {"apiserver", []byte(apiserverObject)}} {
		for _, path := range []struct {
			name   string
			decode func([]byte, int, func(int64) error) (objectMeta, error)
		}{{"one-pass", decodeObjectMetaWith}, {"scan", scanObjectMeta}} {
			b.Run("object="+obj.name+"/path="+path.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := path.decode(obj.raw, 100, reserve); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
