package psbinding

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
)

// The states of a Binding's rollout, as RolloutControlObserver.RolloutState
// reports them.
const (
	StateRollingOut = "rolling-out"
	StatePaused     = "paused"
	StateHalted     = "halted"
	StateUndoing    = "undoing"
	StateUndone     = "undone"
	StateComplete   = "complete"
)

// The events of an operator's controls, as RolloutControlObserver.RolloutControl
// reports them.
const (
	ControlPause  = "pause"
	ControlResume = "resume"
	ControlUndo   = "undo"
	ControlPlan   = "plan"
)

// RolloutControlObserver is a RolloutObserver that is also told of an
// operator's controls and of the state of each Binding's rollout, for
// metrics (package metrics implements it). Its methods are called from the
// reconciler's workers; they must be quick.
type RolloutControlObserver interface {
	// RolloutControl: a rollout was paused, resumed or undone, or a
	// paused Binding's plan published (ControlPause, ...).
	RolloutControl(binding schema.GroupResource, control string)
	// RolloutState: the rollout of the Binding key is now in state (one
	// of the State constants), "" once it has none (no policy, or the
	// Binding is gone). key identifies the Binding to keep one state per
	// Binding; it must never become a label.
	RolloutState(binding schema.GroupResource, key types.NamespacedName, state string)
}

// controlObserverOf is o when it observes controls, else one that does
// nothing.
func controlObserverOf(o Observer) RolloutControlObserver {
	if co, ok := o.(RolloutControlObserver); ok {
		return co
	}
	return nopObserver{}
}

func (nopObserver) RolloutControl(schema.GroupResource, string)                     {}
func (nopObserver) RolloutState(schema.GroupResource, types.NamespacedName, string) {}

// stateOf is the state a reconcile's plan leaves the rollout in.
func stateOf(p rolloutPlan) string {
	ro := p.status
	switch {
	case p.reason == ReasonRolloutHalted:
		return StateHalted
	case ro.Paused:
		return StatePaused
	case p.done && ro.UndoneFrom > 0:
		return StateUndone
	case ro.UndoneFrom > 0:
		return StateUndoing
	case p.done:
		return StateComplete
	}
	return StateRollingOut
}

// observeState reports b's rollout state.
func (r *BaseReconciler) observeState(ctx context.Context, b Bindable, state string) {
	controlObserverOf(r.observerIn(ctx)).RolloutState(r.GVR.GroupResource(), types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}, state)
}

// reportControls records, as events and metrics, what an operator's
// controls changed between the last report prev and now: a rollout
// paused or resumed, an undo started.
func (r *BaseReconciler) reportControls(ctx context.Context, b Bindable, prev, now *duck.RolloutStatus) {
	observer := controlObserverOf(r.observerIn(ctx))
	event := func(control, reason, msg string) {
		observer.RolloutControl(r.GVR.GroupResource(), control)
		if r.Recorder != nil {
			r.Recorder.Event(b, corev1.EventTypeNormal, reason, msg)
		}
	}
	wasPaused := prev != nil && prev.Paused
	switch {
	case now.Paused && !wasPaused && now.Wave == 0:
		event(ControlPause, ReasonRolloutPaused, fmt.Sprintf("rollout of generation %d paused before its first wave: no subject changes until %s is removed", now.Generation, RolloutPausedAnnotation))
	case now.Paused && !wasPaused:
		event(ControlPause, ReasonRolloutPaused, fmt.Sprintf("rollout of generation %d paused after wave %d: no further wave starts until %s is removed", now.Generation, now.Wave, RolloutPausedAnnotation))
	case !now.Paused && wasPaused:
		event(ControlResume, ReasonRolloutResumed, fmt.Sprintf("rollout of generation %d resumed", now.Generation))
	}
	if now.UndoneFrom > 0 && (prev == nil || prev.UndoneFrom != now.UndoneFrom) {
		event(ControlUndo, ReasonUndoingRollout, fmt.Sprintf("undoing generation %d: its subjects are brought back to generation %d, the last that rolled out completely", now.UndoneFrom, now.Generation))
	}
}

// clearPlan removes the plan from b's status: a Binding without a policy
// has none.
func clearPlan(b Bindable) {
	if rec, ok := b.GetBindingStatus().(duck.PlanRecorder); ok {
		rec.SetPlan(nil)
	}
}
