package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
)

// The AdmissionReview versions the server speaks. v1beta1 has the same
// fields as v1, so one Go type decodes both; only the echoed apiVersion
// differs.
const (
	admissionV1      = "admission.k8s.io/v1"
	admissionV1beta1 = "admission.k8s.io/v1beta1"
	reviewKind       = "AdmissionReview"
)

// syncPollInterval is how often a request waiting for a controller's
// informers checks HasSynced; it matters only during start-up.
const syncPollInterval = 20 * time.Millisecond

// route is one registered controller.
type route struct {
	ctrl   AdmissionController
	syncer Syncer // nil when the controller has no informers
	synced atomic.Bool
}

// hasSynced reports whether the controller is ready, remembering success so
// the hot path is one atomic load.
func (rt *route) hasSynced() bool {
	if rt.syncer == nil || rt.synced.Load() {
		return true
	}
	if rt.syncer.HasSynced() {
		rt.synced.Store(true)
		return true
	}
	return false
}

// waitSynced blocks until the controller has synced, ctx ends or timeout
// passes.
func (rt *route) waitSynced(ctx context.Context, timeout time.Duration) bool {
	if rt.hasSynced() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(syncPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return rt.hasSynced()
		case <-tick.C:
			if rt.hasSynced() {
				return true
			}
		}
	}
}

// reviewError is a rejection of the HTTP request itself, before any
// controller saw it.
type reviewError struct {
	code int
	msg  string
}

func badRequest(format string, args ...any) *reviewError {
	return &reviewError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// serveAdmission answers one AdmissionReview for rt.
func (s *Server) serveAdmission(w http.ResponseWriter, r *http.Request, rt *route) {
	start := time.Now()
	review, rerr := s.decode(w, r)
	if rerr != nil {
		s.logger.Debug("rejected admission request", zap.String("path", r.URL.Path), zap.Int("code", rerr.code), zap.String("reason", rerr.msg))
		if rerr.code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		http.Error(w, rerr.msg, rerr.code)
		return
	}
	req := review.Request

	ctx := r.Context()
	if d, ok := timeoutParam(r.URL); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if !rt.waitSynced(ctx, s.opts.ReadinessTimeout) {
		msg := fmt.Sprintf("admission controller %s: informers have not synced", rt.ctrl.Path())
		s.logger.Warn("admission before sync", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)))
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	ctx = WithDryRun(ctx, req.DryRun != nil && *req.DryRun)

	resp, panicked := s.admit(ctx, rt, req)
	if panicked {
		http.Error(w, fmt.Sprintf("admission controller %s panicked on %s %s; see the webhook's log", rt.ctrl.Path(), req.Kind.Kind, objectName(req)), http.StatusInternalServerError)
		return
	}
	if resp == nil {
		s.logger.Error("admission controller returned no response", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)))
		http.Error(w, fmt.Sprintf("admission controller %s returned no response", rt.ctrl.Path()), http.StatusInternalServerError)
		return
	}
	resp.UID = req.UID
	if len(resp.Patch) > 0 && resp.PatchType == nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	body, err := json.Marshal(&out)
	if err != nil {
		s.logger.Error("encode AdmissionReview", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)), zap.Error(err))
		http.Error(w, fmt.Sprintf("encode AdmissionReview response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)

	if ce := s.logger.Check(zap.DebugLevel, "admission"); ce != nil {
		ce.Write(
			zap.String("path", rt.ctrl.Path()),
			zap.String("uid", string(req.UID)),
			zap.String("kind", req.Kind.Kind),
			zap.String("namespace", req.Namespace),
			zap.String("name", req.Name),
			zap.String("operation", string(req.Operation)),
			zap.Bool("dryRun", IsDryRun(ctx)),
			zap.Bool("allowed", resp.Allowed),
			zap.Bool("patched", len(resp.Patch) > 0),
			zap.Duration("latency", time.Since(start)),
		)
	}
}

// decode reads and checks the AdmissionReview of r.
func (s *Server) decode(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, *reviewError) {
	if r.Method != http.MethodPost {
		return nil, &reviewError{http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: AdmissionReviews are sent with POST", r.Method)}
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, &reviewError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q not supported: want application/json", ct)}
	}
	limit := s.opts.MaxRequestBodyBytes
	if r.ContentLength > limit {
		return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", limit)}
		}
		return nil, badRequest("read request body: %v", err)
	}
	if len(body) == 0 {
		return nil, badRequest("empty request body: want an AdmissionReview")
	}
	review := new(admissionv1.AdmissionReview)
	if err := json.Unmarshal(body, review); err != nil {
		return nil, badRequest("decode AdmissionReview: %v", err)
	}
	switch {
	case review.APIVersion != admissionV1 && review.APIVersion != admissionV1beta1:
		return nil, badRequest("AdmissionReview apiVersion %q not supported: want %s or %s", review.APIVersion, admissionV1, admissionV1beta1)
	case review.Kind != reviewKind:
		return nil, badRequest("kind %q is not %s", review.Kind, reviewKind)
	case review.Request == nil:
		return nil, badRequest("AdmissionReview has no request")
	case review.Request.UID == "":
		return nil, badRequest("AdmissionReview request has no uid")
	}
	return review, nil
}

// admit calls the controller, turning a panic into a logged failure so one
// bad object cannot take the webhook down for every other.
func (s *Server) admit(ctx context.Context, rt *route, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logger.Error("admission controller panicked",
				zap.String("path", rt.ctrl.Path()),
				zap.String("uid", string(req.UID)),
				zap.String("kind", req.Kind.Kind),
				zap.String("namespace", req.Namespace),
				zap.String("name", req.Name),
				zap.String("operation", string(req.Operation)),
				zap.Any("panic", v),
				zap.ByteString("stack", debug.Stack()),
			)
			resp, panicked = nil, true
		}
	}()
	return rt.ctrl.Admit(ctx, req), false
}

// timeoutParam reads the ?timeout= the kube-apiserver adds from the
// webhook's timeoutSeconds, so a controller stops working on a request the
// caller has given up on.
func timeoutParam(u *url.URL) (time.Duration, bool) {
	if u.RawQuery == "" {
		return 0, false
	}
	d, err := time.ParseDuration(u.Query().Get("timeout"))
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

func objectName(req *admissionv1.AdmissionRequest) string {
	if req.Namespace == "" {
		return req.Name
	}
	return req.Namespace + "/" + req.Name
}
