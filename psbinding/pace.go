package psbinding

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// rollingOut is a reconcile that paced its subjects: the Binding is not
// Ready yet, and is looked at again after retry.
type rollingOut struct {
	reason, message string
	retry           time.Duration
}

func (e *rollingOut) Error() string { return e.message }

// generations remembers, per Binding, when the reconciler first saw its
// current generation (for the quiet period edits are coalesced over) and
// the rollout it last computed.
type generations struct {
	mu   sync.Mutex
	seen map[types.UID]seenGeneration
	// verdicts are, per Binding, the kinds of change found of its
	// subjects at one generation (recordsonly.go).
	verdicts map[types.UID]*verdicts
}

type seenGeneration struct {
	generation int64
	// at is when this process first saw the generation; readyAt when it
	// may reach subjects (the zero time: at once).
	at, readyAt time.Time
	// rollout is the rollout this process last computed for the Binding:
	// the status the next reconcile reads from the cache may not show it
	// yet, and a stale one would bring back subjects rolled back since,
	// or forget a halt.
	rollout *duck.RolloutStatus
	// plan is the plan this process last computed for the paused
	// Binding, and planKey what it was computed from (planKey).
	plan    *duck.PlanStatus
	planKey uint64
}

// planOf returns the plan of b this process computed from key, nil if
// none.
func (g *generations) planOf(b Bindable, key uint64) *duck.PlanStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.seen[b.GetUID()]; s.plan != nil && s.planKey == key {
		return s.plan.DeepCopy()
	}
	return nil
}

// setPlan records the plan of b this process computed from key.
func (g *generations) setPlan(b Bindable, key uint64, p *duck.PlanStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]seenGeneration{}
	}
	s := g.seen[b.GetUID()]
	s.plan, s.planKey = p.DeepCopy(), key
	g.seen[b.GetUID()] = s
}

// rolloutOf returns the rollout of b this process last computed, nil if
// none.
func (g *generations) rolloutOf(b Bindable) *duck.RolloutStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen[b.GetUID()].rollout.DeepCopy()
}

// setRollout records the rollout of b this process computed.
func (g *generations) setRollout(b Bindable, ro *duck.RolloutStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]seenGeneration{}
	}
	s := g.seen[b.GetUID()]
	s.rollout = ro.DeepCopy()
	g.seen[b.GetUID()] = s
}

// forget drops what is remembered of b, once it is gone.
func (g *generations) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.seen, uid)
	delete(g.verdicts, uid)
}

// quietFor returns how much longer b's generation must wait before it
// reaches subjects: edits that arrive within quiet of one another reach
// them once, as the last. Under a rollout policy (paced) every edit waits
// quiet, but a new Binding's first generation; without one, the first
// edit of a Binding that was quiet (or that this process has not seen
// before) reaches them at once, so a burst costs each subject at most two
// changes: the first edit and the last.
//
// A process sees edits when it reconciles, which a busy one does late: a
// generation seen quiet long after the one before it was is the first
// edit after a quiet spell only if it is the very next one. A skipped
// generation means edits this process never saw came in between, so it
// cannot know they were quiet, and waits.
func (g *generations) quietFor(b Bindable, quiet time.Duration, now time.Time, paced bool) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]seenGeneration{}
	}
	s, ok := g.seen[b.GetUID()]
	if !ok || s.generation != b.GetGeneration() {
		next := seenGeneration{generation: b.GetGeneration(), at: now, readyAt: now.Add(quiet), rollout: s.rollout, plan: s.plan, planKey: s.planKey}
		switch {
		// Ready at once: the zero time, not now, so that a caller whose now
		// was read a moment before another's (both waiting on mu) is not
		// told to wait a few nanoseconds.
		case !ok && (b.GetGeneration() == 1 || !paced):
			next.readyAt = time.Time{} // a new Binding, or one this process knows nothing of
		case ok && !paced && b.GetGeneration() == s.generation+1 && now.Sub(s.at) >= quiet:
			next.readyAt = time.Time{} // the first edit after a quiet spell
		}
		s = next
		g.seen[b.GetUID()] = s
	}
	return max(0, s.readyAt.Sub(now))
}

// controls are an operator's controls of one reconcile's rollout.
type controls struct {
	// paused: RolloutPausedAnnotation holds the Binding.
	paused bool
	// undoneFrom, when set, is the generation an undo takes back: the
	// rollout restores the Binding's (undoTarget); restoredWave is the
	// last wave its subjects record of the generation restored.
	undoneFrom   int64
	restoredWave int
}

// pace applies policy to one reconcile of b's subjects: it reads live the
// subjects whose records hold a change of b still in flight (changed,
// filtered by changeInFlight against the last report), decides (decideRollout),
// rolls back what a halt rolls back, publishes the plan of a paused
// rollout, and returns the part of todo to patch now (the next wave, each
// marked with its change) or a *rollingOut to report. seen is what the
// reconcile's survey found.
func (r *BaseReconciler) pace(ctx, mctx context.Context, b Bindable, s *subject, policy RolloutPolicy, seen surveyed, ctl controls) ([]work, error) {
	rec, ok := b.GetBindingStatus().(duck.RolloutRecorder)
	if !ok {
		err := fmt.Errorf("%s: a rollout policy needs a status that records a rollout (embed duck.Status)", describe(b))
		return nil, unavailable(ReasonRolloutPolicyInvalid, err, controller.NewPermanentError(err))
	}
	now := time.Now()
	prev := rec.GetRollout()
	mine := r.generations.rolloutOf(b)
	if mine != nil {
		prev = mine // this process's last word is newer than the cached status
	}
	in := rolloutInput{generation: b.GetGeneration(), policy: policy, prev: prev, todo: seen.todo, held: seen.held, total: seen.selected, inForce: seen.inForce, now: now,
		quietWait: r.generations.quietFor(b, policy.Quiet, now, true), paused: ctl.paused, undoneFrom: ctl.undoneFrom, restoredWave: ctl.restoredWave,
		recordsOnly: seen.recordsOnly}
	// Records-only work rolls nothing out: written now, with no wave,
	// unless the rollout is paused (then the plan counts it).
	var unpaced []work
	if !ctl.paused {
		unpaced = seen.recordsOnly
		in.inForce += len(unpaced)
	}
	for _, c := range seen.changed {
		if !changeInFlight(prev, c.name, c.change) {
			continue
		}
		var err error
		if c.done, c.failure, err = r.rolloutState(ctx, s, c.name); err != nil {
			return nil, err
		}
		in.changed = append(in.changed, c)
	}
	lagging, err := r.notCachedYet(ctx, b, s, mine, seen.changed)
	if err != nil {
		return nil, err
	}
	in.changed = append(in.changed, lagging...)
	plan := decideRollout(in)
	r.applyRollBack(ctx, b, s, policy, &plan)
	observer := rolloutObserverOf(r.observerIn(ctx))
	if plan.halted {
		observer.RolloutHalted(r.GVR.GroupResource())
		if r.Recorder != nil {
			r.Recorder.Event(b, corev1.EventTypeWarning, ReasonRolloutHalted, plan.message)
		}
	}
	r.reportControls(ctx, b, prev, plan.status)
	rec.SetRollout(plan.status)
	r.generations.setRollout(b, plan.status)
	if err := r.updatePlan(ctx, mctx, b, s, in); err != nil {
		return nil, err
	}
	r.observeState(ctx, b, stateOf(plan))
	if plan.done {
		return unpaced, r.completed(ctx, b, prev, plan.status)
	}
	if len(plan.wave) > 0 {
		observer.RolloutWave(r.GVR.GroupResource())
	}
	return append(plan.wave, unpaced...), &rollingOut{reason: plan.reason, message: plan.message, retry: plan.retry}
}

// applyRollBack rolls back the subjects plan names, drops those rolled
// back from its changing subjects, and completes a halt's message with
// the rollbacks that failed.
func (r *BaseReconciler) applyRollBack(ctx context.Context, b Bindable, s *subject, policy RolloutPolicy, plan *rolloutPlan) {
	var failures []string
	rolledBack := 0
	for _, name := range plan.rollBack {
		if err := r.rollBack(ctx, s, b, name); err != nil {
			failures = append(failures, fmt.Sprintf("rollback of %s failed: %v", name, err))
			continue
		}
		rolledBack++
		plan.status.Changing = slices.DeleteFunc(plan.status.Changing, func(c duck.ChangingSubject) bool { return c.Name == name })
	}
	if plan.reason == ReasonRolloutHalted {
		plan.message = strings.Join(append([]string{haltMessage(policy, plan.status)}, failures...), "; ")
	}
	if rolledBack > 0 {
		rolloutObserverOf(r.observerIn(ctx)).RolloutRolledBack(r.GVR.GroupResource(), rolledBack)
	}
}

// completed is the end of a rollout: the generation is recorded for a
// later undo; an undo's end is reported (RolloutUndone), not Ready.
func (r *BaseReconciler) completed(ctx context.Context, b Bindable, prev, ro *duck.RolloutStatus) error {
	if ro.UndoneFrom == 0 {
		if b.GetDeletionTimestamp() != nil {
			return nil // an unbinding in waves: nothing to undo to
		}
		return r.recordHistory(ctx, b)
	}
	msg := fmt.Sprintf("generation %d undone: every subject carries generation %d, the last that rolled out completely; edit the Binding, or remove %s to roll generation %d out again",
		ro.UndoneFrom, ro.Generation, RolloutUndoAnnotation, ro.UndoneFrom)
	if r.Recorder != nil && (prev == nil || prev.UndoneFrom != ro.UndoneFrom || !prev.Complete(ro.Generation)) {
		r.Recorder.Event(b, corev1.EventTypeNormal, ReasonRolloutUndone, msg)
	}
	return &rollingOut{reason: ReasonRolloutUndone, message: msg}
}

// notCachedYet reads live the subjects this process last reported
// changing to b's generation (mine) that the cache does not show changing
// to it (cached): on a busy API server the cache can lag the patches of
// the last wave, and a subject it does not show yet still takes its slot.
// A subject the cache shows with an earlier change (the last generation
// that rolled out, or the binding a paced deletion takes back) is one it
// does not show yet. Those whose live records hold the change are
// returned, with their state.
func (r *BaseReconciler) notCachedYet(ctx context.Context, b Bindable, s *subject, mine *duck.RolloutStatus, cached []changedSubject) ([]changedSubject, error) {
	if mine == nil || mine.Generation != b.GetGeneration() {
		return nil, nil
	}
	by := r.boundBy(b)
	var out []changedSubject
	for _, c := range mine.Changing {
		if c.Generation != b.GetGeneration() || slices.ContainsFunc(cached, func(k changedSubject) bool {
			return k.name == c.Name && k.change.Generation == c.Generation
		}) {
			continue
		}
		u, err := r.readLive(ctx, s, c.Name)
		if err != nil {
			return nil, err
		}
		if u == nil {
			continue
		}
		change, ok := duck.ChangesOf(u.GetAnnotations()).Lookup(by)
		if !ok || change.Generation != b.GetGeneration() {
			continue
		}
		done, failure := RolledOut(u)
		out = append(out, changedSubject{name: c.Name, change: change, done: done, failure: failure})
	}
	return out, nil
}

// rolloutState reads subject name in full and says whether its rollout is
// complete, or why it cannot complete (RolledOut). A subject that is gone
// is done.
func (r *BaseReconciler) rolloutState(ctx context.Context, s *subject, name string) (done bool, failure string, _ error) {
	u, err := r.readLive(ctx, s, name)
	if u == nil || err != nil {
		return u == nil && err == nil, "", err
	}
	done, failure = RolledOut(u)
	return done, failure, nil
}

// readLive reads subject name from the API server (not the cache) for its
// rollout; nil, nil when it is gone.
func (r *BaseReconciler) readLive(ctx context.Context, s *subject, name string) (*unstructured.Unstructured, error) {
	u, err := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("subject %s %s/%s: read its rollout: %w", s.gvr.GroupResource(), s.ref.Namespace, name, err)
	}
	return u, nil
}

// RolledOut reads a workload's rollout from its status: complete once its
// controller has observed the current generation and every replica is
// updated and available (Deployment, StatefulSet, DaemonSet); failed, with
// the reason, when a Deployment reports ProgressDeadlineExceeded. Kinds
// without a rollout status are complete.
func RolledOut(u *unstructured.Unstructured) (complete bool, failed string) {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	num := func(m map[string]any, field string) int64 {
		v, _, _ := unstructured.NestedInt64(m, field)
		return v
	}
	observed := num(status, "observedGeneration") >= u.GetGeneration()
	replicas := int64(1)
	if v, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
		replicas = v
	}
	switch u.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps":
		conds, _, _ := unstructured.NestedSlice(status, "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded" {
				return false, "ProgressDeadlineExceeded"
			}
		}
		return observed && num(status, "updatedReplicas") == replicas && num(status, "availableReplicas") >= replicas &&
			num(status, "replicas") == replicas, ""
	case "StatefulSet.apps":
		cur, _, _ := unstructured.NestedString(status, "currentRevision")
		upd, _, _ := unstructured.NestedString(status, "updateRevision")
		return observed && num(status, "updatedReplicas") == replicas && num(status, "readyReplicas") >= replicas && cur == upd, ""
	case "DaemonSet.apps":
		desired := num(status, "desiredNumberScheduled")
		return observed && num(status, "updatedNumberScheduled") == desired && num(status, "numberAvailable") >= desired, ""
	}
	return true, ""
}

// maxRollbackAttempts bounds the attempts of one rollback whose guard
// fails: the subject changed between its read and the patch.
const maxRollbackAttempts = 3

// rollBack gives subject name back the pod template and bound record it
// had before b's paced change to b's generation, and holds it there, in
// one guarded patch (rollbackPatch). A subject that no longer carries the
// generation (rolled back already) is left as it is.
func (r *BaseReconciler) rollBack(ctx context.Context, s *subject, b Bindable, name string) error {
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	by, gen := r.boundBy(b), b.GetGeneration()
	for attempt := 1; ; attempt++ {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		ops, err := rollbackPatch(s.shape, u, by, gen)
		if err != nil || ops == nil {
			return err
		}
		body, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: r.fieldManager(ctx)})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsInvalid(err) && !apierrors.IsConflict(err):
			return err
		case attempt == maxRollbackAttempts:
			return fmt.Errorf("its pod template changed, where the rollback would undo, since the rollout patched it: %s", apiMessage(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(firstPatchWait + rand.N(firstPatchWait)):
		}
	}
}

// rollbackPatch is the JSON patch that rolls u back from by's change to
// generation: first its records, guarded (by's bound entry back to what
// it was, its change and rollback records gone, a hold at generation),
// then the recorded patch of the pod template. It is nil when u does not
// carry by at generation (rolled back already, or never changed to it).
func rollbackPatch(shape duck.Shape, u *unstructured.Unstructured, by duck.BoundBy, generation int64) ([]jsonpatch.Operation, error) {
	ann := u.GetAnnotations()
	if g, ok := duck.BoundGeneration(ann, by); !ok || g != generation {
		return nil, nil
	}
	rbs, err := duck.RollbacksOf(ann)
	if err != nil {
		return nil, err
	}
	key, rb, ok := rbs.Find(by)
	if !ok || key != by.Entry(generation) {
		return nil, fmt.Errorf("no rollback recorded for %s", by.Entry(generation))
	}
	var template []jsonpatch.Operation
	if err := json.Unmarshal(rb.Patch, &template); err != nil {
		return nil, fmt.Errorf("annotation %s: %s: %w", RollbackAnnotation, key, err)
	}
	cur, err := shape.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	next := cur.DeepCopy()
	next.Annotations = duck.Forget(next.Annotations, by)
	if rb.Bound > 0 {
		duck.MarkBound(next, by, rb.Bound)
	}
	held := duck.HeldOf(next.Annotations)
	held[by] = generation
	next.Annotations = duck.SetHeld(next.Annotations, held)
	records, err := shape.CreatePatch(cur, next)
	if err != nil {
		return nil, err
	}
	guarded, err := duck.Guard(u.Object, records)
	if err != nil {
		return nil, err
	}
	return append(guarded, template...), nil
}

// recordChange writes into after (a copy, when it changes anything) the
// records of w's change by (at generation) of the subject o, which before
// decodes: under a rollout policy, the change (its wave and time), the
// end of any hold of by, and, with rollback, how to take the change back;
// without one, by's rollout records go, since they describe an earlier
// change; an unbinding without one removes every record of by.
func recordChange(shape duck.Shape, o *observed, by duck.BoundBy, generation int64, w work, before, after *duck.WithPod) (*duck.WithPod, error) {
	marked := after.DeepCopy()
	switch {
	case w.paced == nil && !w.bind:
		marked.Annotations = duck.Forget(marked.Annotations, by)
	case w.paced == nil:
		marked.Annotations = duck.Forget(marked.Annotations, by)
		if g, ok := duck.BoundGeneration(after.Annotations, by); ok {
			duck.MarkBound(marked, by, g)
		}
	default:
		held := duck.HeldOf(marked.Annotations)
		for e := range held {
			if e.Matches(by) {
				delete(held, e)
			}
		}
		marked.Annotations = duck.SetHeld(marked.Annotations, held)
		marked.Annotations = duck.SetChange(marked.Annotations, by, w.paced)
		var rb *duck.Rollback
		if w.rollback {
			var err error
			u, err := o.object()
			if err != nil {
				return nil, err
			}
			if rb, err = rollbackOf(shape, u, by, before, after); err != nil {
				return nil, err
			}
		}
		var err error
		if marked.Annotations, err = duck.SetRollback(marked.Annotations, by, generation, rb); err != nil {
			return nil, err
		}
	}
	if equality.Semantic.DeepEqual(marked.Annotations, after.Annotations) {
		return after, nil
	}
	return marked, nil
}

// rollbackOf is how to take back the change from before to after of the
// subject u: the patch of its pod template from after to before, guarded
// by identity against the object the change leaves (duck.GuardIdentity),
// and the generation of by it carried before. A change that leaves the
// template as it was keeps no patch.
func rollbackOf(shape duck.Shape, u *unstructured.Unstructured, by duck.BoundBy, before, after *duck.WithPod) (*duck.Rollback, error) {
	templateOnly := after.DeepCopy()
	templateOnly.Labels, templateOnly.Annotations = before.Labels, before.Annotations
	reverse, err := shape.CreatePatch(templateOnly, before)
	if err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	rb := &duck.Rollback{Patch: json.RawMessage("[]")}
	if g, ok := duck.BoundGeneration(before.Annotations, by); ok {
		rb.Bound = g
	}
	if len(reverse) == 0 {
		return rb, nil
	}
	afterObj := u.DeepCopy()
	if err := shape.Apply(after, afterObj); err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	guarded, err := duck.GuardIdentity(afterObj.Object, reverse)
	if err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	if rb.Patch, err = json.Marshal(guarded); err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	return rb, nil
}

// RolloutObserver is an Observer that is also told of rollouts, for
// metrics (package metrics implements it). Its methods are called from the
// reconciler's workers; they must be quick.
type RolloutObserver interface {
	// RolloutWave: a wave of subjects was started.
	RolloutWave(binding schema.GroupResource)
	// RolloutHalted: a rollout halted.
	RolloutHalted(binding schema.GroupResource)
	// RolloutRolledBack: n subjects of a halted wave were rolled back.
	RolloutRolledBack(binding schema.GroupResource, n int)
}

// rolloutObserverOf is o when it observes rollouts, else one that does
// nothing.
func rolloutObserverOf(o Observer) RolloutObserver {
	if ro, ok := o.(RolloutObserver); ok {
		return ro
	}
	return nopObserver{}
}

func (nopObserver) RolloutWave(schema.GroupResource)            {}
func (nopObserver) RolloutHalted(schema.GroupResource)          {}
func (nopObserver) RolloutRolledBack(schema.GroupResource, int) {}
