package psbinding

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// RollingOut reports whether the Binding o stands for has a rollout in
// progress: the only reconciles that read a subject's status (to see a
// wave roll out) are of such Bindings, so NewSubjectEventHandler passes a
// subject's status-only updates to them alone. A Binding is rolling out
// when a rollout policy paces it and its rollout (this process's last
// computed, else its status) is not complete at its generation: subjects
// changing or halted, or selected subjects not reached yet. A Binding
// being deleted is rolling out when its policy paces deletion. A Binding
// that cannot be read is reported rolling out (the event is passed on);
// one that is gone is not. It reads the Binding from Get (a lister) and
// sends no request.
func (r *BaseReconciler) RollingOut(o tracker.Observer) bool {
	if r.Get == nil {
		return true
	}
	b, err := r.Get(o.Namespace, o.Name)
	if err != nil {
		return !apierrors.IsNotFound(err)
	}
	policy, err := r.rolloutPolicy(b)
	if err != nil || !policy.Enabled() {
		return false // no rollout: nothing reads a subject's status
	}
	if b.GetDeletionTimestamp() != nil {
		return policy.PaceDeletion
	}
	var status *duck.RolloutStatus
	if rec, ok := b.GetBindingStatus().(duck.RolloutRecorder); ok {
		status = rec.GetRollout()
	}
	return !r.generations.complete(b, status)
}

// complete reports whether the rollout of b this process last computed,
// else status, is complete at b's generation.
func (g *generations) complete(b Bindable, status *duck.RolloutStatus) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mine := g.seen[b.GetUID()].rollout; mine != nil {
		status = mine
	}
	return status.Complete(b.GetGeneration())
}
