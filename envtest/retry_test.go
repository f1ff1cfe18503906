package envtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRetryCRDDelay: a write refused with the kube-apiserver's "CRD not
// available yet" 503 is sent again, body and all, until it passes; any
// other 503 is answered as it came.
func TestRetryCRDDelay(t *testing.T) {
	tests := []struct {
		name      string
		refusal   string // the 503's body, the first two times
		wantCode  int
		wantCalls int32
	}{
		{name: "a kind seconds old", refusal: `{"message":"Resource kind x not found. ` + crdDelay + `."}`, wantCode: http.StatusCreated, wantCalls: 3},
		{name: "another 503", refusal: `{"message":"etcd is down"}`, wantCode: http.StatusServiceUnavailable, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies = append(bodies, string(b))
				if calls.Add(1) <= 2 {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, tc.refusal)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			client := &http.Client{Transport: retryingCRDDelay(http.DefaultTransport)}
			resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"kind":"X"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || calls.Load() != tc.wantCalls {
				t.Errorf("status %d after %d calls, want %d after %d", resp.StatusCode, calls.Load(), tc.wantCode, tc.wantCalls)
			}
			for i, b := range bodies {
				if diff := cmp.Diff(`{"kind":"X"}`, b); diff != "" {
					t.Errorf("call %d's body (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}
