package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/certificates"
)

func TestHandlerRejectsBadInput(t *testing.T) {
	s := newTestServer(t, Options{MaxRequestBodyBytes: 4096}, allowAll("/mutate"))
	good := reviewJSON(t, admissionV1, "uid-1", []byte(`{}`), false)
	noRequest := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)
	noUID := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`)

	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        io.Reader
		length      int64 // -1: unknown length, as with chunked encoding
		wantCode    int
		wantMsg     string
	}{
		{"GET", http.MethodGet, "/mutate", "application/json", nil, 0, http.StatusMethodNotAllowed, "method GET not allowed: AdmissionReviews are sent with POST"},
		{"unknown path", http.MethodPost, "/nope", "application/json", strings.NewReader(string(good)), 0, http.StatusNotFound, "no admission controller at path /nope"},
		{"no Content-Type", http.MethodPost, "/mutate", "", strings.NewReader(string(good)), 0, http.StatusUnsupportedMediaType, `Content-Type "" not supported: want application/json`},
		{"YAML", http.MethodPost, "/mutate", "application/yaml", strings.NewReader(string(good)), 0, http.StatusUnsupportedMediaType, `Content-Type "application/yaml" not supported: want application/json`},
		{"malformed Content-Type", http.MethodPost, "/mutate", "application/json; ===", strings.NewReader(string(good)), 0, http.StatusUnsupportedMediaType, `Content-Type "application/json; ===" not supported: want application/json`},
		{"declared length too large", http.MethodPost, "/mutate", "application/json", strings.NewReader(strings.Repeat(" ", 5000)), 0, http.StatusRequestEntityTooLarge, "request body of 5000 bytes exceeds the limit of 4096 bytes (--webhook-max-request-body-bytes)"},
		{"streamed body too large", http.MethodPost, "/mutate", "application/json", strings.NewReader(strings.Repeat(" ", 5000)), -1, http.StatusRequestEntityTooLarge, "request body exceeds the limit of 4096 bytes (--webhook-max-request-body-bytes)"},
		{"empty body", http.MethodPost, "/mutate", "application/json", strings.NewReader(""), 0, http.StatusBadRequest, "empty request body: want an AdmissionReview"},
		{"truncated JSON", http.MethodPost, "/mutate", "application/json", strings.NewReader(`{"apiVersion":`), 0, http.StatusBadRequest, "decode AdmissionReview: invalid JSON at offset 14: unexpected end"},
		{"JSON array", http.MethodPost, "/mutate", "application/json", strings.NewReader(`[]`), 0, http.StatusBadRequest, "decode AdmissionReview: JSON is an array, not an object"},
		{"wrong field type", http.MethodPost, "/mutate", "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`), 0, http.StatusBadRequest, "decode AdmissionReview: json: cannot unmarshal number into Go struct field AdmissionRequest.request.uid of type types.UID"},
		{"unknown apiVersion", http.MethodPost, "/mutate", "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}`), 0, http.StatusBadRequest, `AdmissionReview apiVersion "admission.k8s.io/v2" not supported: want admission.k8s.io/v1 or admission.k8s.io/v1beta1`},
		{"wrong kind", http.MethodPost, "/mutate", "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`), 0, http.StatusBadRequest, `kind "Pod" is not AdmissionReview`},
		{"no request", http.MethodPost, "/mutate", "application/json", strings.NewReader(string(noRequest)), 0, http.StatusBadRequest, "AdmissionReview has no request"},
		{"no uid", http.MethodPost, "/mutate", "application/json", strings.NewReader(string(noUID)), 0, http.StatusBadRequest, "AdmissionReview request has no uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, tt.body)
			if tt.length != 0 {
				r.ContentLength = tt.length
			}
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			type result struct {
				Code int
				Msg  string
			}
			got := result{w.Code, strings.TrimSuffix(w.Body.String(), "\n")}
			if diff := cmp.Diff(result{tt.wantCode, tt.wantMsg}, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandlerAnswers(t *testing.T) {
	ops := []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/labels/x", Value: "y"}}
	var sawDryRun atomic.Bool
	var sawDeadline atomic.Bool
	patcher := &funcController{path: "/patch", admit: func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		sawDryRun.Store(IsDryRun(ctx))
		_, ok := ctx.Deadline()
		sawDeadline.Store(ok)
		resp := PatchResponse(ops)
		resp.UID = "controllers-cannot-change-the-uid"
		return resp
	}}
	denier := &funcController{path: "/deny", admit: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return Denied("no web deployments on Fridays")
	}}
	s := newTestServer(t, Options{}, patcher, denier)

	jsonPT := admissionv1.PatchTypeJSONPatch
	tests := []struct {
		name         string
		path         string
		apiVersion   string
		dryRun       bool
		contentType  string
		want         admissionv1.AdmissionReview
		wantDryRun   bool
		wantDeadline bool
	}{
		{
			name: "v1 patch", path: "/patch?timeout=10s", apiVersion: admissionV1, contentType: "application/json",
			want: admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionV1, Kind: "AdmissionReview"},
				Response: &admissionv1.AdmissionResponse{UID: "uid-1", Allowed: true, PatchType: &jsonPT, Patch: []byte(`[{"op":"add","path":"/metadata/labels/x","value":"y"}]`)},
			},
			wantDeadline: true,
		},
		{
			name: "v1beta1 dry run", path: "/patch", apiVersion: admissionV1beta1, dryRun: true, contentType: "application/json; charset=utf-8",
			want: admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionV1beta1, Kind: "AdmissionReview"},
				Response: &admissionv1.AdmissionResponse{UID: "uid-1", Allowed: true, PatchType: &jsonPT, Patch: []byte(`[{"op":"add","path":"/metadata/labels/x","value":"y"}]`)},
			},
			wantDryRun: true,
		},
		{
			name: "denied", path: "/deny", apiVersion: admissionV1, contentType: "application/json",
			want: admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionV1, Kind: "AdmissionReview"},
				Response: &admissionv1.AdmissionResponse{UID: "uid-1", Result: &metav1.Status{
					Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: "no web deployments on Fridays",
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sawDryRun.Store(false)
			sawDeadline.Store(false)
			w := post(s, tt.path, tt.contentType, reviewJSON(t, tt.apiVersion, "uid-1", []byte(`{"kind":"Deployment"}`), tt.dryRun))
			got := decodeResponse(t, w)
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("review (-want +got):\n%s", diff)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if sawDryRun.Load() != tt.wantDryRun || sawDeadline.Load() != tt.wantDeadline {
				t.Errorf("controller saw IsDryRun=%v deadline=%v, want %v and %v", sawDryRun.Load(), sawDeadline.Load(), tt.wantDryRun, tt.wantDeadline)
			}
		})
	}
}

func TestPanickingControllerYields500AndServerKeepsServing(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	boom := &funcController{path: "/boom", admit: func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.UID == "panic" {
			var m map[string]int
			m["nil map"]++ // a real bug, not a contrived panic(...)
		}
		return Allowed()
	}}
	s := newTestServer(t, Options{Logger: zap.New(core)}, boom)

	w := post(s, "/boom", "application/json", reviewJSON(t, admissionV1, "panic", []byte(`{}`), false))
	if diff := cmp.Diff("admission controller /boom panicked on Deployment default/web; see the webhook's log",
		strings.TrimSpace(w.Body.String())); w.Code != http.StatusInternalServerError || diff != "" {
		t.Errorf("panic answered with %d (-want +got message):\n%s", w.Code, diff)
	}
	entries := logs.FilterMessage("admission controller panicked").All()
	if len(entries) != 1 {
		t.Fatalf("%d panic log lines, want 1", len(entries))
	}
	stack, _ := entries[0].ContextMap()["stack"].(string)
	if !strings.Contains(stack, "handler_test.go") {
		t.Errorf("logged stack does not reach the panicking controller:\n%s", stack)
	}

	got := decodeResponse(t, post(s, "/boom", "application/json", reviewJSON(t, admissionV1, "after", []byte(`{}`), false)))
	if !got.Response.Allowed || got.Response.UID != "after" {
		t.Errorf("request after the panic: %+v, want allowed with uid after", got.Response)
	}
}

func TestNilResponseIs500(t *testing.T) {
	nothing := &funcController{path: "/nil", admit: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil }}
	s := newTestServer(t, Options{}, nothing)
	w := post(s, "/nil", "application/json", reviewJSON(t, admissionV1, "u", []byte(`{}`), false))
	if w.Code != http.StatusInternalServerError || strings.TrimSpace(w.Body.String()) != "admission controller /nil returned no response" {
		t.Errorf("got %d %q, want 500 naming the controller", w.Code, w.Body.String())
	}
}

func TestAdmissionWaitsForSync(t *testing.T) {
	c := &syncingController{funcController: *allowAll("/synced")}
	s := newTestServer(t, Options{ReadinessTimeout: 50 * time.Millisecond}, c)
	body := reviewJSON(t, admissionV1, "u", []byte(`{}`), false)

	w := post(s, "/synced", "application/json", body)
	if w.Code != http.StatusServiceUnavailable || strings.TrimSpace(w.Body.String()) != "admission controller /synced: informers have not synced" {
		t.Errorf("before sync: %d %q, want 503 naming the controller", w.Code, w.Body.String())
	}
	if code, msg := probe(s, ReadyzPath); code != http.StatusServiceUnavailable || msg != "admission controller /synced: informers have not synced" {
		t.Errorf("/readyz before sync: %d %q", code, msg)
	}
	if code, _ := probe(s, HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz before sync: %d, want 200", code)
	}

	// A request that arrives before the sync completes waits for it.
	done := make(chan *httptest.ResponseRecorder)
	slow := newTestServer(t, Options{ReadinessTimeout: time.Minute}, c)
	go func() { done <- post(slow, "/synced", "application/json", body) }()
	time.Sleep(3 * syncPollInterval)
	c.synced.Store(true)
	if w := <-done; w.Code != http.StatusOK {
		t.Errorf("request waiting for sync: %d %q, want 200", w.Code, w.Body.String())
	}
	if code, msg := probe(s, ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz after sync: %d %q, want 200", code, msg)
	}
}

func TestReadyzNeedsCertificate(t *testing.T) {
	secrets := &secretMap{}
	s, err := New(Options{}, secrets, allowAll("/a"))
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := probe(s, ReadyzPath); code != http.StatusServiceUnavailable || !strings.Contains(msg, `secrets "webhook-certs" not found`) {
		t.Errorf("/readyz without Secret: %d %q", code, msg)
	}
	secrets.Set(DefaultSecretName, newTestPKI(t).servingData(t, time.Now(), time.Hour))
	if code, msg := probe(s, ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz with Secret: %d %q", code, msg)
	}
}

func probe(s http.Handler, path string) (int, string) {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code, strings.TrimSpace(w.Body.String())
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		secrets     SecretGetter
		controllers []Admitter
		wantErr     string
	}{
		{"duplicate path", Options{}, &secretMap{}, []Admitter{allowAll("/a"), allowAll("/a")}, "both serve path /a"},
		{"probe path", Options{}, &secretMap{}, []Admitter{allowAll(ReadyzPath)}, "reserved for probes"},
		{"relative path", Options{}, &secretMap{}, []Admitter{allowAll("a")}, `path "a" does not start with /`},
		{"nil controller", Options{}, &secretMap{}, []Admitter{nil}, "admission controller 0 is nil"},
		{"no secrets", Options{}, nil, nil, "no SecretGetter"},
		{"TLS 1.1", Options{TLSMinVersion: 0x0302}, &secretMap{}, nil, "TLS minimum version TLS 1.1 not allowed"},
		{"port", Options{Port: 70000}, &secretMap{}, nil, "port 70000 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts, tt.secrets, tt.controllers...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaultOptions(t *testing.T) {
	got, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultOptions(), got, cmp.Comparer(func(a, b *zap.Logger) bool { return (a == nil) == (b == nil) })); diff != "" {
		t.Errorf("zero Options with defaults differ from DefaultOptions (-want +got):\n%s", diff)
	}
}

func TestResponseHelpers(t *testing.T) {
	jsonPT := admissionv1.PatchTypeJSONPatch
	tests := []struct {
		name string
		got  *admissionv1.AdmissionResponse
		want *admissionv1.AdmissionResponse
	}{
		{"Allowed", Allowed(), &admissionv1.AdmissionResponse{Allowed: true}},
		{"Errored", Errored(http.StatusBadRequest, errors.New("spec.x: bad")), &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Code: 400, Message: "spec.x: bad"}}},
		{"Errored defaults to 500", Errored(0, nil), &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: "unknown error"}}},
		{"PatchResponse without ops", PatchResponse(nil), &admissionv1.AdmissionResponse{Allowed: true}},
		{"PatchResponse", PatchResponse([]jsonpatch.JsonPatchOperation{{Operation: "remove", Path: "/a"}}), &admissionv1.AdmissionResponse{Allowed: true, PatchType: &jsonPT, Patch: []byte(`[{"op":"remove","path":"/a"}]`)}},
		{"PatchResponse with unencodable value", PatchResponse([]jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/a", Value: func() {}}}), &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: "encode JSON patch: operation 0 (add /a): json: unsupported type: func()"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestLogAtDebugOnly(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s := newTestServer(t, Options{Logger: zap.New(core)}, allowAll("/a"))
	post(s, "/a", "application/json", reviewJSON(t, admissionV1, "u", []byte(`{"secretField":"s3cr3t"}`), false))

	entries := logs.All()
	if len(entries) != 1 || entries[0].Level != zapcore.DebugLevel {
		t.Fatalf("log entries %+v, want one at debug level", entries)
	}
	ctx := entries[0].ContextMap()
	delete(ctx, "latency")
	want := map[string]any{"path": "/a", "uid": "u", "kind": "Deployment", "namespace": "default", "name": "web", "operation": "CREATE", "dryRun": false, "allowed": true, "patched": false}
	if diff := cmp.Diff(want, ctx); diff != "" {
		t.Errorf("request log fields (-want +got):\n%s", diff)
	}
	raw, _ := json.Marshal(entries)
	if strings.Contains(string(raw), "s3cr3t") {
		t.Errorf("request log contains the object body")
	}
}

func TestCertificateOptionsMatchServer(t *testing.T) {
	got := Options{ServiceName: "hook"}.CertificateOptions("sys")
	want := certificates.Options{SecretName: DefaultSecretName, Namespace: "sys", ServiceName: "hook", Keys: certificates.DefaultDataKeys()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CertificateOptions (-want +got):\n%s", diff)
	}
}
