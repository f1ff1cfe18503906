package webhook

import (
	"context"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// Outcome is how the server answered one admission request, as an
// Observer is told it. Its String is the value metrics label it with.
type Outcome uint8

// The outcomes of an admission request.
const (
	// OutcomePatched: allowed with a JSON patch.
	OutcomePatched Outcome = iota
	// OutcomeUnchanged: allowed without a patch by a controller that
	// looked at the object (its Bindings applied and changed nothing, say).
	OutcomeUnchanged
	// OutcomeUntouched: allowed by a controller that left the request
	// alone, its object not decoded, because nothing of it applies
	// (Untouched): another operation, kind or namespace, a subresource.
	OutcomeUntouched
	// OutcomeDenied: refused by the controller's decision (Denied: 403, or
	// a response not allowed that carries no status).
	OutcomeDenied
	// OutcomeErrored: the controller could not decide: an Errored
	// response (other than those below), a panic, no response, informers
	// not synced in time, or an answer that did not encode.
	OutcomeErrored
	// OutcomeOverloaded: answered 429 with Retry-After, by the server (its
	// in-flight or memory bounds) or by the controller (Overloaded).
	OutcomeOverloaded
	// OutcomeRefused: beyond one of the server's or the object's bounds:
	// 413 (a body, an object or a patch too large) or 408 (a body not
	// received in time).
	OutcomeRefused
	// OutcomeInvalid: not an AdmissionReview the server accepts (400, 405,
	// 415), before any controller saw it.
	OutcomeInvalid
)

var outcomeNames = [...]string{
	OutcomePatched:    "patched",
	OutcomeUnchanged:  "unchanged",
	OutcomeUntouched:  "untouched",
	OutcomeDenied:     "denied",
	OutcomeErrored:    "errored",
	OutcomeOverloaded: "overloaded",
	OutcomeRefused:    "refused",
	OutcomeInvalid:    "invalid",
}

// Outcomes lists every Outcome, in the order of their values.
func Outcomes() []Outcome {
	out := make([]Outcome, len(outcomeNames))
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// String returns the outcome's name: patched, unchanged, untouched,
// denied, errored, overloaded, refused or invalid.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Admission is what an Observer is told of one answered request.
type Admission struct {
	// Operation is the request's operation; empty when the request was
	// refused before it was decoded.
	Operation admissionv1.Operation
	// Outcome is how it was answered.
	Outcome Outcome
	// DryRun reports a dry-run request.
	DryRun bool
	// Duration runs from the request's headers to its answer being
	// written.
	Duration time.Duration
	// PatchBytes is the length of the JSON patch answered, zero unless
	// Outcome is OutcomePatched.
	PatchBytes int
}

// Observer is told of every request the server routes to an admission
// controller, for metrics (package metrics implements it for Prometheus).
// Requests to paths no controller serves are not observed, so what an
// Observer sees is bounded by the controllers a process runs.
//
// New calls ObserveRoute once for each controller with its Path; the
// function returned (nil to observe nothing) is called once per request to
// that controller, after its answer is written, from the request's
// goroutine, for many requests at once. It must be quick and must not
// block: it runs on the admission path.
type Observer interface {
	ObserveRoute(path string) func(Admission)
}

// Untouched returns a response that admits the object unchanged, as
// Allowed does, and tells the server's Observer that the controller left
// the request alone without decoding its object because nothing of it
// applies (OutcomeUntouched), rather than looking at it and finding
// nothing to change (OutcomeUnchanged). Outside a server it is Allowed.
func Untouched(ctx context.Context) *admissionv1.AdmissionResponse {
	if st := stateFrom(ctx); st != nil {
		st.untouched.Store(true)
	}
	return Allowed()
}

// outcomeOf classifies a controller's response; untouched is whether the
// controller called Untouched.
func outcomeOf(resp *admissionv1.AdmissionResponse, untouched bool) Outcome {
	if resp.Allowed {
		switch {
		case len(resp.Patch) > 0:
			return OutcomePatched
		case untouched:
			return OutcomeUntouched
		default:
			return OutcomeUnchanged
		}
	}
	if resp.Result == nil {
		return OutcomeDenied
	}
	return outcomeOfCode(int(resp.Result.Code), OutcomeErrored)
}

// outcomeOfCode classifies an HTTP status code of a refusal; other is the
// outcome of codes with no class of their own.
func outcomeOfCode(code int, other Outcome) Outcome {
	switch code {
	case http.StatusForbidden:
		return OutcomeDenied
	case http.StatusTooManyRequests:
		return OutcomeOverloaded
	case http.StatusRequestEntityTooLarge, http.StatusRequestTimeout:
		return OutcomeRefused
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		if other == OutcomeInvalid {
			return OutcomeInvalid
		}
	}
	return other
}

// observe tells rt's observer about one request, if it has one.
func (rt *route) observe(start time.Time, req *admissionv1.AdmissionRequest, outcome Outcome, dryRun bool, patchBytes int) {
	if rt.observer == nil {
		return
	}
	a := Admission{Outcome: outcome, DryRun: dryRun, Duration: time.Since(start), PatchBytes: patchBytes}
	if req != nil {
		a.Operation = req.Operation
	}
	rt.observer(a)
}
