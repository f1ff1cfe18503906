package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recordingObserver keeps what the server tells it, by path.
type recordingObserver struct {
	mu    sync.Mutex
	paths []string
	seen  map[string][]Admission
}

func (o *recordingObserver) ObserveRoute(path string) func(Admission) {
	o.mu.Lock()
	o.paths = append(o.paths, path)
	o.mu.Unlock()
	return func(a Admission) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.seen == nil {
			o.seen = map[string][]Admission{}
		}
		o.seen[path] = append(o.seen[path], a)
	}
}

func (o *recordingObserver) take(path string) []Admission {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.seen[path]
	delete(o.seen, path)
	return out
}

// TestObserverSeesEveryOutcome answers one request of each outcome and
// checks what the Observer is told of it: the outcome, the operation (none
// before decoding), dry run, the patch's size and a duration.
func TestObserverSeesEveryOutcome(t *testing.T) {
	ops := []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/labels/x", Value: "y"}}
	ctrl := &funcController{path: "/mutate", admit: func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		switch req.UID {
		case "patch":
			return PatchResponse(ops)
		case "unchanged":
			return Allowed()
		case "untouched":
			return Untouched(ctx)
		case "deny":
			return Denied("no")
		case "not-allowed":
			return &admissionv1.AdmissionResponse{}
		case "error":
			return Errored(0, errors.New("broken"))
		case "bad-object":
			return Errored(http.StatusBadRequest, errors.New("object does not decode"))
		case "overloaded":
			return Overloaded(nil)
		case "too-large":
			return Errored(http.StatusRequestEntityTooLarge, errors.New("too many containers"))
		case "nil":
			return nil
		case "panic":
			panic("boom")
		}
		t.Errorf("unexpected uid %s", req.UID)
		return nil
	}}
	obs := &recordingObserver{}
	s := newTestServer(t, Options{Observer: obs, MaxRequestBodyBytes: 4096}, ctrl, allowAll("/other"))
	if diff := cmp.Diff([]string{"/mutate", "/other"}, obs.paths, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("routes observed (-want +got):\n%s", diff)
	}

	const patchLen = len(`[{"op":"add","path":"/metadata/labels/x","value":"y"}]`)
	tests := []struct {
		uid         string
		dryRun      bool
		contentType string
		body        string // instead of a review
		want        Admission
	}{
		{uid: "patch", want: Admission{Operation: admissionv1.Create, Outcome: OutcomePatched, PatchBytes: patchLen}},
		{uid: "patch", dryRun: true, want: Admission{Operation: admissionv1.Create, Outcome: OutcomePatched, DryRun: true, PatchBytes: patchLen}},
		{uid: "unchanged", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeUnchanged}},
		{uid: "untouched", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeUntouched}},
		{uid: "deny", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeDenied}},
		{uid: "not-allowed", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeDenied}},
		{uid: "error", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeErrored}},
		{uid: "bad-object", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeErrored}},
		{uid: "nil", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeErrored}},
		{uid: "panic", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeErrored}},
		{uid: "overloaded", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeOverloaded}},
		{uid: "too-large", want: Admission{Operation: admissionv1.Create, Outcome: OutcomeRefused}},
		{uid: "body-too-large", body: strings.Repeat(" ", 5000), want: Admission{Outcome: OutcomeRefused}},
		{uid: "not-json", contentType: "application/yaml", want: Admission{Outcome: OutcomeInvalid}},
		{uid: "malformed", body: "{", want: Admission{Outcome: OutcomeInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Outcome.String()+"/"+tt.uid, func(t *testing.T) {
			body := []byte(tt.body)
			if tt.body == "" {
				body = reviewJSON(t, admissionV1, types.UID(tt.uid), []byte(`{"kind":"Deployment"}`), tt.dryRun)
			}
			post(s, "/mutate", cmpOr(tt.contentType, "application/json"), body)
			got := obs.take("/mutate")
			if len(got) != 1 {
				t.Fatalf("observed %d admissions, want 1: %+v", len(got), got)
			}
			if got[0].Duration <= 0 {
				t.Errorf("duration %v, want > 0", got[0].Duration)
			}
			if diff := cmp.Diff(tt.want, got[0], cmpopts.IgnoreFields(Admission{}, "Duration")); diff != "" {
				t.Errorf("admission (-want +got):\n%s", diff)
			}
		})
	}
	// A path no controller serves is not observed: a caller cannot make
	// new series out of made-up paths.
	post(s, "/made-up", "application/json", reviewJSON(t, admissionV1, "x", []byte(`{}`), false))
	if len(obs.seen) != 0 {
		t.Errorf("unrouted request observed: %+v", obs.seen)
	}
}

func TestOutcomeNames(t *testing.T) {
	var names []string
	for _, o := range Outcomes() {
		names = append(names, o.String())
	}
	want := []string{"patched", "unchanged", "untouched", "denied", "errored", "overloaded", "refused", "invalid"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("outcome names (-want +got):\n%s", diff)
	}
	if got := Outcome(200).String(); got != "unknown" {
		t.Errorf("Outcome(200) = %q, want unknown", got)
	}
}

func TestUntouchedOutsideAServerIsAllowed(t *testing.T) {
	if diff := cmp.Diff(Allowed(), Untouched(context.Background())); diff != "" {
		t.Errorf("Untouched (-want +got):\n%s", diff)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
