package webhook

import (
	"context"
	"fmt"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admitter answers the AdmissionReviews sent to its Path: it is what a
// Server routes a path to.
type Admitter interface {
	// Path is the URL path the controller serves, starting with "/". It must
	// be unique within a Server and must not be /healthz or /readyz.
	Path() string
	// Admit decides on one request. The server owns decoding, the response's
	// UID and encoding; Admit returns only the decision, usually built with
	// Allowed, Denied, Errored or PatchResponse. ctx carries the request's
	// deadline and IsDryRun. A nil response is answered with 500.
	Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// AdmissionController is the name knative.dev/pkg/webhook gives an
// Admitter.
//
// Deprecated: use Admitter. The alias is kept for code ported from knative
// (MIGRATING.md).
type AdmissionController = Admitter

// Syncer is implemented by an Admitter whose answers depend on
// informer caches. The server waits (up to Options.ReadinessTimeout) for
// HasSynced before calling Admit, and reports unready on /readyz until every
// Syncer has synced. Once true, HasSynced is not called again.
type Syncer interface {
	HasSynced() bool
}

// PathLeaver is an Admitter that can leave the kube-apiserver's admission
// path as its server shuts down: another path (a kind's
// MutatingAdmissionPolicy) admits what it admits, with no process. Serve
// calls LeavePath once, as its context ends and its grace period begins,
// with a context that ends with the grace period. LeavePath returns true
// once the kube-apiserver has been seen not to call the Admitter (its
// webhook programmed with no rules, a call through the kube-apiserver not
// reaching it), and false when it cannot leave: nothing else admits its
// kind, or its replica may not write, or the context ended first. It
// must not leave a window: the other path is seen in force before the
// webhook leaves. When every Admitter of a Server has left, the server
// drains at once rather than at the end of its grace period: no caller
// needs the time to move away.
type PathLeaver interface {
	LeavePath(ctx context.Context) bool
}

// Checker is implemented by an Admitter that can find a fault an operator
// must act on (a declarative kind's handover that the kube-apiserver
// refuses, say). The server reports unready on /readyz, with Check's
// error, for as long as Check returns one; admissions are answered as
// before. Check is called on every /readyz request: it must be cheap and
// safe for concurrent use.
type Checker interface {
	Check() error
}

type dryRunKey struct{}

// WithDryRun returns ctx marked as a dry run or not. The server calls it for
// every request; tests of an Admitter may call it too.
func WithDryRun(ctx context.Context, dryRun bool) context.Context {
	return context.WithValue(ctx, dryRunKey{}, dryRun)
}

// IsDryRun reports whether the admission request behind ctx is a dry run, in
// which case the controller must have no side effects outside its response.
func IsDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}

// Allowed returns a response that admits the object unchanged.
func Allowed() *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// Denied returns a response that rejects the object with 403 Forbidden and
// msg, which the user sees in the API error.
func Denied(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: msg,
		},
	}
}

// Errored returns a response that rejects the object because the controller
// could not decide: code is an HTTP status (500 when zero) and err's text is
// the message.
func Errored(code int32, err error) *admissionv1.AdmissionResponse {
	if code == 0 {
		code = http.StatusInternalServerError
	}
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    code,
			Message: msg,
		},
	}
}

// PatchResponse returns a response that admits the object after applying
// ops as a JSON patch. No ops is the same as Allowed.
func PatchResponse(ops []jsonpatch.JsonPatchOperation) *admissionv1.AdmissionResponse {
	if len(ops) == 0 {
		return Allowed()
	}
	patch, err := encodePatch(ops)
	if err != nil {
		return Errored(http.StatusInternalServerError, fmt.Errorf("encode JSON patch: %w", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}
