package psbinding

import (
	"context"

	"github.com/bindkit/bindkit/duck"
)

// Companions returns the Bindings admission applies to an object of
// group/kind named name in namespace, with labels, in the order their Do
// runs: those of the index the last Reconcile built (none before the
// first). It is what BaseReconciler.Companions asks. The Bindings are
// the index's: callers must not change them.
func (ac *AdmissionReconciler) Companions(group, kind, namespace, name string, labels map[string]string) []Bindable {
	ix := ac.index.Load()
	if ix == nil {
		return nil
	}
	return ix.lookup(group, kind, namespace, name, labels)
}

// companionApps are the other Bindings whose change a patch that binds b
// to the subject (read as before) carries too: each Binding admission
// would apply to the subject (Companions) that the subject does not
// record at all, is not held from, that is not being deleted and that no
// rollout paces (no policy, not paused, not undone), when b's own change
// is paced by none either. Bindings that select the same subjects then
// reach each of them in one template change, as a webhook's admission of
// the subject would have made, rather than one a Binding; each is
// recorded at the generation applied, so its own reconcile finds the
// subject done. A subject that records a companion at another generation
// is left to that Binding's reconcile, which knows how to take the old
// one back. A companion whose context cannot be prepared is left out.
func (r *BaseReconciler) companionApps(ctx context.Context, b Bindable, s *subject, w work, before *duck.WithPod) []application {
	if r.Companions == nil || !w.bind || w.paced != nil || w.undo != nil || r.paced(b) {
		return nil
	}
	var apps []application
	for _, c := range r.Companions(s.gvk.Group, s.gvk.Kind, before.Namespace, before.Name, before.Labels) {
		if c.GetName() == b.GetName() || c.GetDeletionTimestamp() != nil || r.paced(c) {
			continue
		}
		by := r.boundBy(c)
		if _, recorded := duck.BoundGeneration(before.Annotations, by); recorded {
			continue
		}
		if _, held := duck.HeldOf(before.Annotations).Lookup(by); held {
			continue
		}
		if duck.NewerRecords(before.Annotations, by) != nil {
			continue // a newer bindkit's record: left alone
		}
		// c is the index's, the informer's: the author's code gets a copy,
		// one for WithContext and Do.
		own, err := privateCopy(c)
		if err != nil {
			continue
		}
		cctx := ctx
		if r.WithContext != nil {
			if cctx, err = callWithContext(ctx, r.WithContext, own); err != nil {
				continue
			}
		}
		apps = append(apps, application{b: own, private: true, ctx: cctx, bind: true, by: by, record: true})
	}
	return apps
}

// paced reports whether a rollout paces b's changes: a policy (the
// kind's or its annotations'), an operator's pause or undo, or
// annotations that do not parse (taken as pacing, so the Binding's own
// reconcile deals with them).
func (r *BaseReconciler) paced(b Bindable) bool {
	p, err := r.rolloutPolicy(b)
	if err != nil || p.Enabled() {
		return true
	}
	paused, undo, err := controlsOf(b)
	return err != nil || paused || undo
}
