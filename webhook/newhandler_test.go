package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
)

// A Server from NewHandler admits as New's does, through ServeHTTP, and
// is ready without a certificate; it refuses to serve TLS itself.
func TestNewHandler(t *testing.T) {
	panicking := &funcController{path: "/panics", admit: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		panic("author bug")
	}}
	syncing := &syncingController{funcController: *allowAll("/later")}
	syncing.synced.Store(true)
	s, err := NewHandler(Options{MaxRequestBodyBytes: 64 << 10}, allowAll("/allow"), panicking, syncing)
	if err != nil {
		t.Fatal(err)
	}
	body := reviewJSON(t, admissionV1, "uid-1", newDeploymentJSON(t, "default", "web"), false)
	tests := []struct {
		name, path string
		body       []byte
		wantCode   int
	}{
		{"admitted", "/allow", body, http.StatusOK},
		{"a controller's panic answers 500", "/panics", body, http.StatusInternalServerError},
		{"no route", "/nowhere", body, http.StatusNotFound},
		{"bodies over the bound", "/allow", make([]byte, 65<<10), http.StatusRequestEntityTooLarge},
		{"ready without a certificate", ReadyzPath, nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w *httptest.ResponseRecorder
			if tt.body == nil {
				w = httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
			} else {
				w = post(s, tt.path, "application/json", tt.body)
			}
			if diff := cmp.Diff(tt.wantCode, w.Code); diff != "" {
				t.Errorf("status (-want +got):\n%s\nbody: %s", diff, w.Body.String())
			}
		})
	}
	review := decodeResponse(t, post(s, "/allow", "application/json", body))
	if diff := cmp.Diff(admissionv1.AdmissionResponse{UID: "uid-1", Allowed: true}, *review.Response); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}

	if cfg := s.TLSConfig(); cfg != nil {
		t.Errorf("TLSConfig = %v, want nil", cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "NewHandler") {
		t.Errorf("Serve = %v, want an error naming NewHandler", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("Serve left its listener open")
	}
}

func TestNewHandlerRefuses(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		controllers []Admitter
		wantErr     string
	}{
		{"client certificates it cannot check", Options{ClientCAFile: "/etc/ca.pem"}, nil, "ClientCAFile"},
		{"a nil controller", Options{}, []Admitter{nil}, "admission controller 0 is nil"},
		{"a probe path", Options{}, []Admitter{allowAll(ReadyzPath)}, "reserved for probes"},
		{"a path twice", Options{}, []Admitter{allowAll("/a"), allowAll("/a")}, "both serve path /a"},
		{"a bad option", Options{MaxAdmissionsInFlight: -1}, nil, "MaxAdmissionsInFlight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewHandler(tt.opts, tt.controllers...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewHandler = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// checkingController reports the fault it is given.
type checkingController struct {
	funcController
	fault atomic.Pointer[error]
}

func (c *checkingController) Check() error {
	if err := c.fault.Load(); err != nil {
		return *err
	}
	return nil
}

// TestReadyzFailsWhileACheckerReportsAFault: /readyz fails with the
// fault a Checker reports and recovers when it clears; /healthz does not
// follow it.
func TestReadyzFailsWhileACheckerReportsAFault(t *testing.T) {
	c := &checkingController{funcController: *allowAll("/checked")}
	s, err := NewHandler(Options{}, c)
	if err != nil {
		t.Fatal(err)
	}
	fault := errors.New("probe of the admission path refused")
	for _, tc := range []struct {
		name     string
		fault    error
		wantCode int
		wantBody string
	}{
		{"no fault", nil, http.StatusOK, "ok"},
		{"a fault", fault, http.StatusServiceUnavailable, "admission controller /checked: probe of the admission path refused"},
		{"cleared", nil, http.StatusOK, "ok"},
	} {
		if tc.fault != nil {
			c.fault.Store(&tc.fault)
		} else {
			c.fault.Store(nil)
		}
		code, body := probe(s.ProbeHandler(), ReadyzPath)
		if code != tc.wantCode || body != tc.wantBody {
			t.Errorf("%s: /readyz = %d %q, want %d %q", tc.name, code, body, tc.wantCode, tc.wantBody)
		}
		if code, _ := probe(s.ProbeHandler(), HealthzPath); code != http.StatusOK {
			t.Errorf("%s: /healthz = %d, want 200", tc.name, code)
		}
	}
}
