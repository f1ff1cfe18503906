package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
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
