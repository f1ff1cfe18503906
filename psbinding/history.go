package psbinding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/duck"
)

// RolloutHistoryAnnotation on a Binding records, newest first, the last
// generations whose rollout completed under a rollout policy, each with
// the Binding's spec at that generation: what an undo
// (RolloutUndoAnnotation) brings the subjects back to. The reconciler
// writes it when a rollout completes; it goes with the Binding. The value
// is a JSON list of {"generation": n, "spec": {...}}, at most
// MaxRolloutHistory entries and MaxRolloutHistoryBytes: older entries are
// dropped to fit, and a spec larger than that alone is not recorded (the
// Binding then cannot be undone to that generation).
//
// It is a record on the object, not status, because no later reconcile
// could rebuild it: a generation's spec is gone once the Binding is
// edited. An update that replaces the Binding's annotations whole (a PUT
// without it, kubectl replace) loses it, and undo with it.
const RolloutHistoryAnnotation = "bindings.bindkit.dev/rollout-history"

// Bounds of RolloutHistoryAnnotation.
const (
	MaxRolloutHistory      = 3
	MaxRolloutHistoryBytes = 64 << 10
)

// HistoryEntry is a generation of a Binding whose rollout completed, as
// RolloutHistoryAnnotation records it.
type HistoryEntry struct {
	Generation int64           `json:"generation"`
	Spec       json.RawMessage `json:"spec"`
}

// HistoryOf reads b's RolloutHistoryAnnotation, newest first; an
// unreadable value reads as none, with the error.
func HistoryOf(annotations map[string]string) ([]HistoryEntry, error) {
	v := annotations[RolloutHistoryAnnotation]
	if v == "" {
		return nil, nil
	}
	var h []HistoryEntry
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", RolloutHistoryAnnotation, err)
	}
	return h, nil
}

// Restorable returns the newest entry of history older than generation:
// what undoing generation restores.
func Restorable(history []HistoryEntry, generation int64) (HistoryEntry, bool) {
	for _, e := range history {
		if e.Generation < generation && len(e.Spec) > 0 {
			return e, true
		}
	}
	return HistoryEntry{}, false
}

// withHistory returns history with generation's spec first, bounded; ok
// is false when nothing changes (generation is recorded already) or the
// spec alone is too large.
func withHistory(history []HistoryEntry, generation int64, spec json.RawMessage) ([]HistoryEntry, bool) {
	if len(history) > 0 && history[0].Generation == generation {
		return history, false
	}
	out := []HistoryEntry{{Generation: generation, Spec: spec}}
	size := len(spec)
	for _, e := range history {
		if e.Generation >= generation || len(out) == MaxRolloutHistory || size+len(e.Spec) > MaxRolloutHistoryBytes {
			continue
		}
		out = append(out, e)
		size += len(e.Spec)
	}
	return out, size <= MaxRolloutHistoryBytes
}

// recordHistory records b's generation, whose rollout just completed, in
// its RolloutHistoryAnnotation; a spec too large to record is a Warning
// event, once per generation.
func (r *BaseReconciler) recordHistory(ctx context.Context, b Bindable) error {
	history, _ := HistoryOf(b.GetAnnotations())
	if len(history) > 0 && history[0].Generation == b.GetGeneration() {
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return fmt.Errorf("%s: record its rollout history: %w", describe(b), err)
	}
	spec, err := json.Marshal(content["spec"])
	if err != nil {
		return fmt.Errorf("%s: record its rollout history: %w", describe(b), err)
	}
	next, ok := withHistory(history, b.GetGeneration(), spec)
	if !ok {
		if r.Recorder != nil {
			r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonUndoUnavailable,
				"generation %d rolled out, but its spec (%d bytes) is too large to record for an undo (at most %d)", b.GetGeneration(), len(spec), MaxRolloutHistoryBytes)
		}
		return nil
	}
	value, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("%s: record its rollout history: %w", describe(b), err)
	}
	return r.patchBinding(ctx, b, setAnnotationOps(b, RolloutHistoryAnnotation, string(value)))
}

// undoTarget returns what b's subjects are brought to: b itself, or, while
// RolloutUndoAnnotation undoes its generation, b at the generation the
// undo restores (its recorded spec, the same name, UID and annotations),
// and b as undone. An undo with nothing recorded to restore is an
// *unavailableError.
func undoTarget(b Bindable) (target, undone Bindable, _ error) {
	if _, undo, _ := controlsOf(b); !undo {
		return b, nil, nil
	}
	history, err := HistoryOf(b.GetAnnotations())
	entry, ok := Restorable(history, b.GetGeneration())
	if !ok {
		why := "no earlier generation's complete rollout is recorded"
		if err != nil {
			why = err.Error()
		}
		err := fmt.Errorf("%s: undo of generation %d: %s (%s); nothing is changed", describe(b), b.GetGeneration(), why, RolloutHistoryAnnotation)
		return nil, nil, unavailable(ReasonUndoUnavailable, err, nil)
	}
	restored, err := atGeneration(b, entry)
	if err != nil {
		err = fmt.Errorf("%s: undo of generation %d: restore generation %d: %w", describe(b), b.GetGeneration(), entry.Generation, err)
		return nil, nil, unavailable(ReasonUndoUnavailable, err, nil)
	}
	return restored, b, nil
}

// atGeneration is b with the spec and generation of entry: a new object of
// b's type, decoded from b's content with entry's spec in place.
func atGeneration(b Bindable, entry HistoryEntry) (Bindable, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return nil, err
	}
	var spec any
	if err := json.Unmarshal(entry.Spec, &spec); err != nil {
		return nil, fmt.Errorf("annotation %s: generation %d: %w", RolloutHistoryAnnotation, entry.Generation, err)
	}
	content["spec"] = spec
	meta, _ := content["metadata"].(map[string]any)
	if meta == nil {
		return nil, errors.New("no metadata")
	}
	meta["generation"] = entry.Generation
	t := reflect.TypeOf(b)
	if t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("binding type %s is not a pointer", t)
	}
	out, ok := reflect.New(t.Elem()).Interface().(Bindable)
	if !ok {
		return nil, fmt.Errorf("binding type %s: a new one is not Bindable", t)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, fmt.Errorf("decode generation %d: %w", entry.Generation, err)
	}
	return out, nil
}

// copyReport copies the rollout and the plan from's reconcile computed
// into to: a reconcile of an undo computes them on the restored
// generation, and reports them on the Binding.
func copyReport(from, to Bindable) {
	if f, ok := from.GetBindingStatus().(duck.RolloutRecorder); ok {
		if t, ok := to.GetBindingStatus().(duck.RolloutRecorder); ok {
			t.SetRollout(f.GetRollout().DeepCopy())
		}
	}
	if f, ok := from.GetBindingStatus().(duck.PlanRecorder); ok {
		if t, ok := to.GetBindingStatus().(duck.PlanRecorder); ok {
			t.SetPlan(f.GetPlan().DeepCopy())
		}
	}
}

// generationString is a generation as annotations spell it.
func generationString(g int64) string { return strconv.FormatInt(g, 10) }
