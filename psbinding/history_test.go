package psbinding

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
)

// TestHistoryKeepsTheNewestGenerationsThatFit: a completed generation goes
// first, a recorded one is not recorded again, at most MaxRolloutHistory
// are kept, and older ones leave to fit MaxRolloutHistoryBytes.
func TestHistoryKeepsTheNewestGenerationsThatFit(t *testing.T) {
	spec := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n) + `"`) }
	entry := func(g int64, n int) HistoryEntry { return HistoryEntry{Generation: g, Spec: spec(n)} }
	for _, tc := range []struct {
		name    string
		history []HistoryEntry
		gen     int64
		size    int
		want    []HistoryEntry
		changed bool
	}{
		{"first", nil, 1, 10, []HistoryEntry{entry(1, 10)}, true},
		{"recorded already", []HistoryEntry{entry(2, 10), entry(1, 10)}, 2, 10, []HistoryEntry{entry(2, 10), entry(1, 10)}, false},
		{"newest first, bounded", []HistoryEntry{entry(3, 10), entry(2, 10), entry(1, 10)}, 4, 10, []HistoryEntry{entry(4, 10), entry(3, 10), entry(2, 10)}, true},
		{"older ones leave to fit", []HistoryEntry{entry(2, MaxRolloutHistoryBytes/2), entry(1, 10)}, 3, MaxRolloutHistoryBytes / 2, []HistoryEntry{entry(3, MaxRolloutHistoryBytes/2), entry(1, 10)}, true},
		{"too large alone", []HistoryEntry{entry(1, 10)}, 2, MaxRolloutHistoryBytes + 1, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withHistory(tc.history, tc.gen, spec(tc.size))
			if ok != tc.changed {
				t.Fatalf("changed %v, want %v", ok, tc.changed)
			}
			if ok {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("history (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestUndoTargetIsTheBindingAtTheRestoredGeneration: an undo of the
// Binding's generation gives the Binding at the newest earlier generation
// recorded (its spec, its generation, the same identity), and the Binding
// as undone; an undo with nothing to restore, or of another generation,
// changes nothing.
func TestUndoTargetIsTheBindingAtTheRestoredGeneration(t *testing.T) {
	b := &envBinding{}
	b.SetNamespace("ns")
	b.SetName("env")
	b.SetUID("u1")
	b.SetGeneration(5)
	b.Spec.Env = corev1.EnvVar{Name: "URL", Value: "https://five"}
	b.Status.Rollout = &duck.RolloutStatus{Generation: 5, Wave: 2}
	history, err := json.Marshal([]HistoryEntry{
		{Generation: 3, Spec: json.RawMessage(`{"subject":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"env":{"name":"URL","value":"https://three"}}`)},
		{Generation: 2, Spec: json.RawMessage(`{"env":{"name":"URL","value":"https://two"}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.SetAnnotations(map[string]string{RolloutHistoryAnnotation: string(history), RolloutUndoAnnotation: "5"})

	target, undone, err := undoTarget(b)
	if err != nil {
		t.Fatal(err)
	}
	got := target.(*envBinding)
	if undone != b || got.GetGeneration() != 3 || got.GetUID() != "u1" || got.GetName() != "env" || got.Spec.Env.Value != "https://three" ||
		got.Spec.Subject.Name != "web" || got.Status.Rollout.Generation != 5 {
		t.Errorf("undo target %+v (undone %v), want the Binding at generation 3", got, undone == b)
	}

	b.Annotations[RolloutUndoAnnotation] = "4"
	if target, undone, err := undoTarget(b); err != nil || target != b || undone != nil {
		t.Errorf("an undo of another generation: target %v, undone %v, %v; want the Binding itself", target, undone, err)
	}
	b.Annotations[RolloutUndoAnnotation] = "5"
	b.SetGeneration(2)
	b.Annotations[RolloutUndoAnnotation] = "2"
	_, _, err = undoTarget(b)
	if u, ok := errors.AsType[*unavailableError](err); !ok || u.reason != ReasonUndoUnavailable || !strings.Contains(err.Error(), "undo of generation 2: no earlier generation's complete rollout is recorded") {
		t.Errorf("undo with nothing earlier recorded: %v, want %s", err, ReasonUndoUnavailable)
	}
}
