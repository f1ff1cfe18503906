package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

// BenchmarkAdmissionRoundTrip measures one AdmissionReview through the
// handler: decode, route, a no-op controller, encode. The object is a
// Deployment of about 3 KB. Results are in BENCHMARKS.md.
func BenchmarkAdmissionRoundTrip(b *testing.B) {
	object := newDeploymentJSON(b, "default", "web")
	body := reviewJSON(b, admissionV1, "0b0f8d3e-5c3a-4d55-9a4e-0e6f2bd0b8a1", object, false)
	s := newTestServer(b, Options{}, allowAll("/noop"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/noop", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
	}
	b.ReportMetric(float64(len(object)), "object-bytes")
}

// BenchmarkDecodeReview measures the steps of decoding the review of
// BenchmarkAdmissionRoundTrip: the scan that validates it and estimates
// its memory (scan), the one-pass decode after it (decode), and
// sigs.k8s.io/json's decode, which the server ran after the scan before
// (kjson).
func BenchmarkDecodeReview(b *testing.B) {
	body := reviewJSON(b, admissionV1, "0b0f8d3e-5c3a-4d55-9a4e-0e6f2bd0b8a1", newDeploymentJSON(b, "default", "web"), false)
	est, err := jsonscan.Scan(body, reviewType(), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("step=scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := jsonscan.Scan(body, reviewType(), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step=decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastReview(body, est.Marked); !ok {
				b.Fatal("not decoded in one pass")
			}
		}
	})
	b.Run("step=kjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var review admissionv1.AdmissionReview
			if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
				b.Fatal(err)
			}
		}
	})
}
