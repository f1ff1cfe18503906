package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	kjson "sigs.k8s.io/json"
)

// FuzzHandler feeds arbitrary bodies and Content-Types to the handler. Seeds
// live in testdata/fuzz/FuzzHandler. Whatever the input, the handler must not
// panic, must answer with one of the documented codes, and a 200 must carry a
// decodable review that echoes the request's UID and apiVersion.
func FuzzHandler(f *testing.F) {
	f.Add("application/json", reviewJSON(f, admissionV1, "seed", []byte(`{"kind":"Deployment"}`), true))
	f.Add("application/json; charset=utf-8", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x","object":null}}`))
	f.Add("text/plain", []byte(`{}`))

	patcher := &funcController{path: "/fuzz", admit: func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return PatchResponse([]jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/labels/fuzzed", Value: string(req.UID)}})
	}}
	s := newTestServer(f, Options{MaxRequestBodyBytes: 64 << 10}, patcher)

	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		w := post(s, "/fuzz", contentType, body)
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
			if w.Body.Len() == 0 {
				t.Fatalf("%d without a message", w.Code)
			}
			return
		default:
			t.Fatalf("unexpected status %d: %q", w.Code, w.Body.String())
		}
		var in, out admissionv1.AdmissionReview
		// Case-sensitively, as the kube-apiserver and the server decode.
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil {
			t.Fatalf("200 for a body that does not decode: %v", err)
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("200 with an undecodable response: %v", err)
		}
		if out.Response == nil || in.Request == nil || out.Response.UID != in.Request.UID || out.APIVersion != in.APIVersion || out.Kind != "AdmissionReview" {
			t.Fatalf("response %s does not answer request %s", w.Body.Bytes(), body)
		}
	})
}
