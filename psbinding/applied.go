package psbinding

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

// ReasonBindingApplied is the reason of the Normal event a Binding gets
// when a generation of it becomes Ready: applied to every subject it
// selects. Its message names who asked for that generation
// (policy.RequestedByAnnotation), whose authority it carries.
const ReasonBindingApplied = "BindingApplied"

// reportApplied records ReasonBindingApplied on b when its reconcile made
// it Ready at a generation it was not Ready at before (orig is b as the
// reconcile found it).
func (r *BaseReconciler) reportApplied(ctx context.Context, orig, b Bindable) {
	if r.Recorder == nil || ctx.Err() != nil {
		return
	}
	now, ok := readyAt(b)
	if was, wasReady := readyAt(orig); !ok || (wasReady && was == now) {
		return
	}
	r.Recorder.Event(b, corev1.EventTypeNormal, ReasonBindingApplied,
		fmt.Sprintf("generation %d applies to every subject it selects; %s", now, requestedBy(b)))
}

// requestedBy says whose authority b carries, as the event says it.
func requestedBy(b Bindable) string {
	if user := b.GetAnnotations()[policy.RequestedByAnnotation]; user != "" {
		return "requested by " + user
	}
	return "who asked for it is not recorded (" + policy.RequestedByAnnotation + " is missing: written before bindkit recorded it)"
}

// readyAt is the generation b's Ready condition is True at, if it is.
func readyAt(b Bindable) (int64, bool) {
	for _, c := range b.GetBindingStatus().GetConditions() {
		if c.Type == duck.ConditionReady && c.Status == metav1.ConditionTrue {
			return c.ObservedGeneration, true
		}
	}
	return 0, false
}
