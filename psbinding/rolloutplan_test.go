package psbinding

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/duck"
)

// TestChangeInFlight: a recorded change is in flight unless the last
// report says its wave is done and the subject is not changing; a wave the
// report does not know (its leader died first) is in flight.
func TestChangeInFlight(t *testing.T) {
	report := &duck.RolloutStatus{Generation: 3, Wave: 2, Changing: []duck.ChangingSubject{{Name: "b", Generation: 3}, {Name: "old", Generation: 2}}}
	for _, tc := range []struct {
		name   string
		prev   *duck.RolloutStatus
		change duck.Change
		want   bool
	}{
		{"a", nil, duck.Change{Generation: 3, Wave: 1}, true},
		{"a", report, duck.Change{Generation: 3, Wave: 1}, false},
		{"a", report, duck.Change{Generation: 3, Wave: 2}, false},
		{"b", report, duck.Change{Generation: 3, Wave: 2}, true},
		{"c", report, duck.Change{Generation: 3, Wave: 3}, true},
		{"d", report, duck.Change{Generation: 4, Wave: 1}, true},
		{"old", report, duck.Change{Generation: 2, Wave: 7}, true},
		{"x", report, duck.Change{Generation: 2, Wave: 9}, false},
	} {
		if got := changeInFlight(tc.prev, tc.name, tc.change); got != tc.want {
			t.Errorf("%s %+v against %+v: in flight %v, want %v", tc.name, tc.change, tc.prev, got, tc.want)
		}
	}
}

func TestDecideRollout(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	policy := RolloutPolicy{MaxChanging: intstr.FromInt32(2), Deadline: time.Minute, Rollback: true, Quiet: 2 * time.Second}
	binds := func(names ...string) []work {
		var out []work
		for _, n := range names {
			out = append(out, work{name: n, bind: true})
		}
		return out
	}
	changing := func(gen int64, ago time.Duration, names ...string) []duck.ChangingSubject {
		var out []duck.ChangingSubject
		for _, n := range names {
			out = append(out, duck.ChangingSubject{Name: n, Generation: gen, Since: metav1.NewTime(at(ago))})
		}
		return out
	}
	in := func(c ...changedSubject) []changedSubject { return c }
	ch := func(name string, gen int64, wave int, ago time.Duration) changedSubject {
		return changedSubject{name: name, change: duck.Change{Generation: gen, Wave: wave, Since: at(ago)}}
	}
	failed := func(c changedSubject, why string) changedSubject { c.failure = why; return c }
	done := func(c changedSubject) changedSubject { c.done = true; return c }

	tests := []struct {
		name string
		in   rolloutInput
		want rolloutPlan
		// wave names the subjects of the wave, each paced at wantWave.
		wave     []string
		wantWave int
	}{{
		name:     "the first wave",
		in:       rolloutInput{generation: 3, policy: policy, todo: binds("a", "b", "c", "d", "e"), total: 5},
		want:     rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 5, Wave: 1, Changing: changing(3, 0, "a", "b"), Waiting: []string{"c", "d", "e"}}, reason: ReasonRollingOut, retry: rolloutRecheck, message: "rolling out generation 3: 0 of 5 subjects updated, 2 changing, 3 to go, wave 1"},
		wave:     []string{"a", "b"},
		wantWave: 1,
	}, {
		name: "a wave its leader did not report counts: no new wave, the wave counter goes on",
		in: rolloutInput{generation: 3, policy: policy, total: 5, inForce: 2, todo: binds("c", "d", "e"),
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Total: 5},
			changed: in(ch("a", 3, 2, 10*time.Second), ch("b", 3, 2, 10*time.Second))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 5, Wave: 2, Changing: changing(3, 10*time.Second, "a", "b"), Waiting: []string{"c", "d", "e"}},
			reason: ReasonRollingOut, retry: rolloutRecheck, message: "rolling out generation 3: 0 of 5 subjects updated, 2 changing, 3 to go, wave 2"},
	}, {
		name: "a failure halts every subject changing to the generation, the unreported wave included, and rolls them back",
		in: rolloutInput{generation: 3, policy: policy, total: 6, inForce: 4, todo: binds("e", "f"),
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Total: 6, Changing: changing(3, 20*time.Second, "a", "b")},
			changed: in(ch("a", 3, 1, 20*time.Second), failed(ch("b", 3, 1, 20*time.Second), "ProgressDeadlineExceeded"), ch("c", 3, 2, 5*time.Second), ch("d", 3, 2, 5*time.Second))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 6, Wave: 2,
			Changing: append(changing(3, 20*time.Second, "a", "b"), changing(3, 5*time.Second, "c", "d")...),
			Halted:   []string{"a", "b", "c", "d"}, Reasons: []duck.SubjectReason{{Name: "b", Reason: "ProgressDeadlineExceeded"}}, Waiting: []string{"e", "f"}},
			rollBack: []string{"a", "b", "c", "d"}, halted: true, reason: ReasonRolloutHalted,
			message: "rollout of generation 3 halted at wave 2: a: halted with its wave; b: ProgressDeadlineExceeded; c: halted with its wave; d: halted with its wave"},
	}, {
		name: "halted: the same message every time, with what was rolled back; nothing patched",
		in: rolloutInput{generation: 3, policy: policy, total: 6, inForce: 0, todo: binds("a", "b", "e"),
			prev: &duck.RolloutStatus{Generation: 3, Wave: 2, Total: 6, Changing: changing(3, 20*time.Second, "b"), Halted: []string{"a", "b"},
				Reasons: []duck.SubjectReason{{Name: "b", Reason: "ProgressDeadlineExceeded"}}},
			changed: in(failed(ch("b", 3, 1, 20*time.Second), "ProgressDeadlineExceeded"))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 6, Wave: 2, Changing: changing(3, 20*time.Second, "b"), Halted: []string{"a", "b"},
			Reasons: []duck.SubjectReason{{Name: "b", Reason: "ProgressDeadlineExceeded"}}, Waiting: []string{"a", "e"}},
			rollBack: []string{"b"}, reason: ReasonRolloutHalted,
			message: "rollout of generation 3 halted at wave 2: a: halted with its wave; b: ProgressDeadlineExceeded; rolled back a"},
	}, {
		name: "a subject held from the generation: a halt its leader rolled back but did not report; the halt stands, the rest of its wave rolls back, nothing is patched again",
		in: rolloutInput{generation: 3, policy: policy, total: 4, inForce: 0, todo: binds("a", "d"), held: []string{"a"},
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Total: 4},
			changed: in(ch("b", 3, 1, 5*time.Second), ch("c", 3, 1, 5*time.Second))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 4, Wave: 1, Changing: changing(3, 5*time.Second, "b", "c"), Halted: []string{"a", "b", "c"},
			Waiting: []string{"a", "d"}},
			rollBack: []string{"b", "c"}, halted: true, reason: ReasonRolloutHalted,
			message: "rollout of generation 3 halted at wave 1: a: halted with its wave; b: halted with its wave; c: halted with its wave; rolled back a"},
	}, {
		name: "a subject past the deadline fails",
		in: rolloutInput{generation: 3, policy: RolloutPolicy{MaxChanging: intstr.FromInt32(2), Deadline: time.Minute}, total: 2, inForce: 1,
			changed: in(ch("a", 3, 1, 2*time.Minute))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 2, Wave: 1, Changing: changing(3, 2*time.Minute, "a"), Halted: []string{"a"},
			Reasons: []duck.SubjectReason{{Name: "a", Reason: "not rolled out within 1m0s"}}},
			halted: true, reason: ReasonRolloutHalted, message: "rollout of generation 3 halted at wave 1: a: not rolled out within 1m0s"},
	}, {
		name: "a subject changing to a superseded generation keeps its slot and is patched first; it cannot halt this one",
		in: rolloutInput{generation: 4, policy: policy, total: 4, todo: binds("a", "b", "c", "d"),
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Changing: changing(3, 30*time.Second, "c")},
			changed: in(failed(ch("c", 3, 1, 30*time.Second), "ProgressDeadlineExceeded"))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 4, Total: 4, Wave: 1, Changing: append(changing(4, 0, "a"), changing(4, 0, "c")...), Waiting: []string{"b", "d"}},
			reason: ReasonRollingOut, retry: rolloutRecheck, message: "rolling out generation 4: 0 of 4 subjects updated, 2 changing, 2 to go, wave 1"},
		wave:     []string{"c", "a"},
		wantWave: 1,
	}, {
		name: "edits settle first",
		in:   rolloutInput{generation: 4, policy: policy, total: 1, todo: binds("a"), quietWait: 1500 * time.Millisecond},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 4, Total: 1, Waiting: []string{"a"}}, reason: ReasonRollingOut, retry: 1500 * time.Millisecond,
			message: "generation 4: waiting 1.5s for edits to settle before rolling out"},
	}, {
		name: "done subjects leave, the next wave starts",
		in: rolloutInput{generation: 3, policy: policy, total: 3, inForce: 2, todo: binds("c"),
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Changing: changing(3, 5*time.Second, "a", "b")},
			changed: in(done(ch("a", 3, 1, 5*time.Second)), done(ch("b", 3, 1, 5*time.Second)))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 3, Updated: 2, Wave: 2, Changing: changing(3, 0, "c")},
			reason: ReasonRollingOut, retry: rolloutRecheck, message: "rolling out generation 3: 2 of 3 subjects updated, 1 changing, 0 to go, wave 2"},
		wave:     []string{"c"},
		wantWave: 2,
	}, {
		name: "complete",
		in: rolloutInput{generation: 3, policy: policy, total: 3, inForce: 3,
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 2, Changing: changing(3, 5*time.Second, "c")},
			changed: in(done(ch("c", 3, 2, 5*time.Second)))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 3, Updated: 3, Wave: 2}, done: true},
	}, {
		name: "paused before the first wave: a plan, no wave, nothing to look at again",
		in:   rolloutInput{generation: 3, policy: policy, total: 3, todo: binds("a", "b", "c"), paused: true, quietWait: time.Second},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 3, Paused: true, Waiting: []string{"a", "b", "c"}}, reason: ReasonRolloutPaused,
			message: "rollout of generation 3 paused before its first wave: 3 of 3 subjects to change; status.plan says how; remove rollout.bindings.bindkit.dev/paused to resume"},
	}, {
		name: "paused mid-rollout: the wave in flight is watched to its end, no new one starts",
		in: rolloutInput{generation: 3, policy: policy, total: 5, inForce: 2, todo: binds("c", "d", "e"), paused: true,
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Changing: changing(3, 5*time.Second, "a", "b")},
			changed: in(done(ch("a", 3, 1, 5*time.Second)), ch("b", 3, 1, 5*time.Second))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 5, Updated: 1, Wave: 1, Paused: true, Changing: changing(3, 5*time.Second, "b"), Waiting: []string{"c", "d", "e"}},
			reason: ReasonRolloutPaused, retry: rolloutRecheck,
			message: "rollout of generation 3 paused after wave 1: 1 of 5 subjects updated, 1 changing, 3 to go; remove rollout.bindings.bindkit.dev/paused to resume"},
	}, {
		name: "paused, a wave in flight still halts",
		in: rolloutInput{generation: 3, policy: RolloutPolicy{MaxChanging: intstr.FromInt32(2), Deadline: time.Minute}, total: 3, inForce: 1, todo: binds("c"), paused: true,
			prev:    &duck.RolloutStatus{Generation: 3, Wave: 1, Paused: true, Changing: changing(3, 2*time.Minute, "a")},
			changed: in(ch("a", 3, 1, 2*time.Minute))},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 3, Total: 3, Wave: 1, Paused: true, Changing: changing(3, 2*time.Minute, "a"), Halted: []string{"a"},
			Reasons: []duck.SubjectReason{{Name: "a", Reason: "not rolled out within 1m0s"}}, Waiting: []string{"c"}},
			halted: true, reason: ReasonRolloutHalted, message: "rollout of generation 3 halted at wave 1: a: not rolled out within 1m0s"},
	}, {
		name: "an undo rolls the restored generation out in waves after its own, and says so",
		in: rolloutInput{generation: 2, undoneFrom: 4, restoredWave: 7, policy: policy, total: 3, inForce: 1, todo: binds("b", "c"),
			prev: &duck.RolloutStatus{Generation: 4, Wave: 3, Halted: []string{"b"}}},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 2, UndoneFrom: 4, Total: 3, Updated: 1, Wave: 8, Changing: changing(2, 0, "b", "c")}, reason: ReasonUndoingRollout, retry: rolloutRecheck,
			message: "undoing generation 4, restoring generation 2: 1 of 3 subjects updated, 2 changing, 0 to go, wave 8"},
		wave:     []string{"b", "c"},
		wantWave: 8,
	}, {
		name: "a paused undo names what it undoes",
		in:   rolloutInput{generation: 2, undoneFrom: 4, policy: policy, total: 3, inForce: 1, todo: binds("b", "c"), paused: true},
		want: rolloutPlan{status: &duck.RolloutStatus{Generation: 2, UndoneFrom: 4, Total: 3, Updated: 1, Paused: true, Waiting: []string{"b", "c"}}, reason: ReasonRolloutPaused,
			message: "undo of generation 4 (restoring 2) paused before its first wave: 2 of 3 subjects to change; status.plan says how; remove rollout.bindings.bindkit.dev/paused to resume"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.now = now
			got := decideRollout(tc.in)
			var wave []string
			for _, w := range got.wave {
				wave = append(wave, w.name)
				if w.paced == nil || w.paced.Wave != tc.wantWave || w.paced.Generation != tc.in.generation || !w.paced.Since.Equal(now) || w.rollback != tc.in.policy.Rollback {
					t.Errorf("work %s: paced %+v, rollback %v; want wave %d of generation %d at %v", w.name, w.paced, w.rollback, tc.wantWave, tc.in.generation, now)
				}
			}
			if diff := cmp.Diff(tc.wave, wave); diff != "" {
				t.Errorf("wave (-want +got):\n%s", diff)
			}
			got.wave = nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(rolloutPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if tc.want.done != got.status.Complete(tc.in.generation) {
				t.Errorf("done %v, but the status says complete %v", tc.want.done, got.status.Complete(tc.in.generation))
			}
		})
	}
}

// TestPlanWaves: the plan's waves are those decideRollout takes when each
// rolls out at once: what is in flight keeps its slots for the first,
// numbering goes on from the last reported wave, and past the bound the
// waves are counted.
func TestPlanWaves(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	policy := RolloutPolicy{MaxChanging: intstr.FromInt32(2), Deadline: time.Minute}
	binds := func(names ...string) []work {
		var out []work
		for _, n := range names {
			out = append(out, work{name: n, bind: true})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		in          rolloutInput
		max         int
		want        [][]string
		first, more int
	}{{
		name:  "from the start",
		in:    rolloutInput{generation: 1, policy: policy, total: 5, todo: binds("a", "b", "c", "d", "e"), paused: true},
		max:   10,
		want:  [][]string{{"a", "b"}, {"c", "d"}, {"e"}},
		first: 1,
	}, {
		name: "paused after wave 2, one subject still changing",
		in: rolloutInput{generation: 1, policy: policy, total: 7, inForce: 4, todo: binds("e", "f", "g"), paused: true,
			prev:    &duck.RolloutStatus{Generation: 1, Wave: 2, Changing: []duck.ChangingSubject{{Name: "d", Generation: 1, Since: metav1.NewTime(now)}}},
			changed: []changedSubject{{name: "d", change: duck.Change{Generation: 1, Wave: 2, Since: now}}}},
		max:   10,
		want:  [][]string{{"e"}, {"f", "g"}},
		first: 3,
	}, {
		name:  "bounded",
		in:    rolloutInput{generation: 1, policy: policy, total: 9, todo: binds("a", "b", "c", "d", "e", "f", "g", "h", "i")},
		max:   2,
		want:  [][]string{{"a", "b"}, {"c", "d"}},
		first: 1, more: 3,
	}, {
		name: "halted: nothing planned",
		in: rolloutInput{generation: 1, policy: policy, total: 3, todo: binds("b", "c"), paused: true,
			prev: &duck.RolloutStatus{Generation: 1, Wave: 1, Halted: []string{"a"}}},
		max: 10,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.now = now
			waves, first, more := planWaves(tc.in, tc.max)
			if diff := cmp.Diff(tc.want, waves); diff != "" {
				t.Errorf("waves (-want +got):\n%s", diff)
			}
			if first != tc.first || more != tc.more {
				t.Errorf("first wave %d, %d more; want %d, %d more", first, more, tc.first, tc.more)
			}
		})
	}
}
