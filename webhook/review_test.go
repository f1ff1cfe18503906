package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

// fullReview is a review with every field of a request the kube-apiserver
// sends, as it sends them.
const fullReview = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{` +
	`"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",` +
	`"kind":{"group":"autoscaling","version":"v1","kind":"Scale"},` +
	`"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
	`"subResource":"scale",` +
	`"requestKind":{"group":"autoscaling","version":"v1","kind":"Scale"},` +
	`"requestResource":{"group":"apps","version":"v1","resource":"deployments"},` +
	`"requestSubResource":"scale",` +
	`"name":"my-deployment","namespace":"my-namespace","operation":"UPDATE",` +
	`"userInfo":{"username":"admin","uid":"014fbff9a07c","groups":["system:authenticated","my-admin-group"],"extra":{"some-key":["some-value1","some-value2"],"empty":[],"none":null}},` +
	`"object":{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"a \"quoted\" {name}","labels":{"x":"[y]"}},"spec":{"replicas":3}},` +
	`"oldObject":{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":[1,2.5e3,-0,true,false,null,"\\"]}},` +
	`"options":{"apiVersion":"meta.k8s.io/v1","kind":"UpdateOptions"},` +
	`"dryRun":false}}`

// TestDecodeReview checks that decodeReview decodes as
// kjson.UnmarshalCaseSensitivePreserveInts does, and that the one-pass
// decoder (fastReview) takes the reviews the kube-apiserver sends rather
// than leaving them to kjson.
func TestDecodeReview(t *testing.T) {
	for _, tc := range decodeReviewCases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			est, err := jsonscan.Scan(body, reviewType(), 0)
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			if strings.Contains(tc.body, `"object":{`) && est.Marked == nil {
				t.Error("the scan did not mark request.object")
			}
			_, fast := fastReview(body, est.Marked)
			if fast != tc.wantFast {
				t.Errorf("one pass took it: %v, want %v", fast, tc.wantFast)
			}
			checkDecodeReview(t, body, est.Marked)
		})
	}
}

// decodeReviewCases are bodies jsonscan accepts, and whether the one-pass
// decoder takes them (wantFast) or leaves them to kjson. Each is a seed of
// FuzzDecodeReview in testdata/fuzz/FuzzDecodeReview too.
var decodeReviewCases = []struct {
	name     string
	body     string
	wantFast bool
}{
	{"full review", fullReview, true},
	{"spaces everywhere", " {\n\t\"apiVersion\" : \"admission.k8s.io/v1\" ,\r\n \"request\" : { \"uid\" : \"u\" , \"object\" : { \"a\" : [ 1 , { } ] } , \"groups\" : [ ] } } \n", true},
	{"nulls", `{"apiVersion":null,"kind":null,"request":{"uid":null,"kind":null,"resource":null,"requestKind":null,"requestResource":null,"userInfo":{"groups":null,"extra":null},"object":null,"oldObject":null,"options":null,"dryRun":null},"response":null}`, true},
	{"empty lists and objects", `{"request":{"requestKind":{},"requestResource":{},"userInfo":{"groups":[],"extra":{}},"object":{},"oldObject":[],"dryRun":true}}`, true},
	{"null group", `{"request":{"userInfo":{"groups":["a",null,"b"]}}}`, true},
	{"null request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, true},
	{"unknown fields", `{"Request":{"uid":"no"},"extra":[{"request":1}],"request":{"UID":"no","uid":"yes","more":{"uid":"no"},"n":-1.5e-3,"t":true}}`, true},
	{"extra key given twice", `{"request":{"userInfo":{"extra":{"k":["a"],"k":["b","c"]}}}}`, true},
	{"object of other kinds", `{"request":{"object":"str","oldObject":12.5,"options":true}}`, true},
	// Strings with escapes or bytes beyond ASCII: kjson unquotes them
	// one by one.
	{"string escapes", `{"request":{"uid":"a\"b\\c\u00e9\ud83d\ude00","name":"\/x\n"}}`, true},
	{"non-ASCII string", `{"request":{"uid":"é"}}`, true},
	{"invalid UTF-8 string", "{\"request\":{\"uid\":\"a\xffb\"}}", true},
	// What the one pass leaves to kjson.
	{"escaped key", `{"request":{"u\u0069d":"x"}}`, false},
	{"escaped extra key", `{"request":{"userInfo":{"extra":{"\u006b":["v"]}}}}`, false},
	{"response", `{"response":{"uid":"x","allowed":true}}`, false},
	{"number uid", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`, false},
	{"string dryRun", `{"request":{"dryRun":"true"}}`, false},
	{"object groups", `{"request":{"userInfo":{"groups":{}}}}`, false},
	{"number in groups", `{"request":{"userInfo":{"groups":[1]}}}`, false},
	{"string extra value", `{"request":{"userInfo":{"extra":{"k":"v"}}}}`, false},
	{"list kind", `{"request":{"kind":[]}}`, false},
}

// FuzzDecodeReview compares decodeReview, and the one-pass decoder alone,
// with kjson.UnmarshalCaseSensitivePreserveInts on the bodies jsonscan
// accepts, as the handler calls them; the one-pass decoder must not panic
// on any body. Seeds live in testdata/fuzz/FuzzDecodeReview.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(fullReview))
	f.Add(reviewJSON(f, admissionV1, "seed", []byte(`{"kind":"Deployment","metadata":{"name":"web"}}`), true))
	f.Fuzz(func(t *testing.T, body []byte) {
		fastReview(body, nil)
		est, err := jsonscan.Scan(body, reviewType(), 0)
		if err != nil {
			return
		}
		checkDecodeReview(t, body, est.Marked)
		checkDecodeReview(t, body, nil)
	})
}

// checkDecodeReview fails t unless decodeReview, and fastReview when it
// takes body, agree with kjson on body; object is as decodeReview's.
func checkDecodeReview(t *testing.T, body, object []byte) {
	t.Helper()
	var want admissionv1.AdmissionReview
	wantErr := kjson.UnmarshalCaseSensitivePreserveInts(body, &want)
	got, err := decodeReview(body, object)
	switch {
	case wantErr != nil && err == nil:
		t.Fatalf("decoded %s, want kjson's error %v", body, wantErr)
	case wantErr == nil && err != nil:
		t.Fatalf("error %v on %s, which kjson decodes", err, body)
	case wantErr != nil && err.Error() != wantErr.Error():
		t.Fatalf("error %v, want kjson's %v", err, wantErr)
	case wantErr == nil:
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Fatalf("decodeReview(%s) (-kjson +got):\n%s", body, diff)
		}
	}
	fast, ok := fastReview(body, object)
	if !ok {
		return
	}
	if wantErr != nil {
		t.Fatalf("one pass decoded %s, which kjson refuses: %v", body, wantErr)
	}
	if diff := cmp.Diff(&want, fast); diff != "" {
		t.Fatalf("fastReview(%s) (-kjson +got):\n%s", body, diff)
	}
}

// TestEncodeReview checks that encodeReview writes what json.Marshal does,
// byte for byte, whichever way it takes.
func TestEncodeReview(t *testing.T) {
	jsonPatch, other := admissionv1.PatchTypeJSONPatch, admissionv1.PatchType(`<"x">`)
	v1 := metav1.TypeMeta{APIVersion: admissionV1, Kind: reviewKind}
	cases := []struct {
		name string
		tm   metav1.TypeMeta
		resp admissionv1.AdmissionResponse
	}{
		{"allowed", v1, admissionv1.AdmissionResponse{UID: "0f5e4c1a-6c1d", Allowed: true}},
		{"v1beta1 denied", metav1.TypeMeta{APIVersion: admissionV1beta1, Kind: reviewKind}, admissionv1.AdmissionResponse{UID: "u"}},
		{"patch", v1, admissionv1.AdmissionResponse{UID: "u", Allowed: true, Patch: []byte(`[{"op":"add","path":"/a","value":"<&>"}]`), PatchType: &jsonPatch}},
		{"empty patch, empty maps", v1, admissionv1.AdmissionResponse{UID: "u", Allowed: true, Patch: []byte{}, AuditAnnotations: map[string]string{}, Warnings: []string{}}},
		{"no type meta", metav1.TypeMeta{}, admissionv1.AdmissionResponse{UID: "u", Allowed: true}},
		{"uid to escape", v1, admissionv1.AdmissionResponse{UID: "a\"<b>&\\\n\xffé\u2028", Allowed: true}},
		{"odd patch type", v1, admissionv1.AdmissionResponse{UID: "u", Allowed: true, Patch: []byte("[]"), PatchType: &other}},
		{"status", v1, admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{Code: 403, Message: "no"}}},
		{"warnings and annotations", v1, admissionv1.AdmissionResponse{UID: "u", Allowed: true, Warnings: []string{"w"}, AuditAnnotations: map[string]string{"k": "v"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkEncodeReview(t, tc.tm, &tc.resp)
		})
	}
}

// FuzzEncodeReview compares encodeReview with json.Marshal on arbitrary
// UIDs, apiVersions and patches.
func FuzzEncodeReview(f *testing.F) {
	f.Add(admissionV1, "0f5e4c1a-6c1d", true, []byte(`[{"op":"add"}]`))
	f.Add(admissionV1beta1, "<&>", false, []byte(nil))
	f.Fuzz(func(t *testing.T, apiVersion, uid string, allowed bool, patch []byte) {
		resp := admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: allowed, Patch: patch}
		if len(patch) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
		}
		checkEncodeReview(t, metav1.TypeMeta{APIVersion: apiVersion, Kind: reviewKind}, &resp)
	})
}

func checkEncodeReview(t *testing.T, tm metav1.TypeMeta, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	want, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: tm, Response: resp})
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeReview(nil, tm, resp)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("encodeReview = %s\nwant (json.Marshal) %s", got, want)
	}
}
