package psbinding

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

// updatePlan publishes in b's status the plan of its paused rollout (what
// resuming it would do, computePlan), or removes the plan of one that is
// not paused. A plan is computed again only when what it depends on
// changed (planKey): the generation, the policy, the work and, for each
// subject of the work, its generation and bound record as the cache has
// them.
func (r *BaseReconciler) updatePlan(ctx, mctx context.Context, b Bindable, s *subject, in rolloutInput) error {
	rec, ok := b.GetBindingStatus().(duck.PlanRecorder)
	if !ok {
		return nil
	}
	if !in.paused {
		rec.SetPlan(nil)
		return nil
	}
	key, err := r.planKey(ctx, s, in)
	if err != nil {
		return err
	}
	if cached := r.generations.planOf(b, key); cached != nil {
		rec.SetPlan(cached)
		return nil
	}
	plan := r.computePlan(ctx, mctx, b, s, in)
	if old := rec.GetPlan(); old == nil || old.Generation != plan.Generation || old.UndoneFrom != plan.UndoneFrom {
		controlObserverOf(r.observerIn(ctx)).RolloutControl(r.GVR.GroupResource(), ControlPlan)
		if r.Recorder != nil {
			r.Recorder.Event(b, corev1.EventTypeNormal, ReasonRolloutPlanned, planSummary(plan))
		}
	}
	rec.SetPlan(plan)
	r.generations.setPlan(b, key, plan)
	return nil
}

// planSummary says what a plan does, in a line.
func planSummary(p *duck.PlanStatus) string {
	what := "generation " + strconv.FormatInt(p.Generation, 10)
	if p.UndoneFrom > 0 {
		what = fmt.Sprintf("undo of generation %d (restoring %d)", p.UndoneFrom, p.Generation)
	}
	records := ""
	if p.RecordsOnly > 0 {
		records = fmt.Sprintf(" (%d of them change only their records, at once)", p.RecordsOnly)
	}
	return fmt.Sprintf("%s planned: %d subjects to bind, %d to unbind, %d unchanged, in %d waves%s; kubectl bindkit plan shows how",
		what, p.Bind, p.Unbind, p.Unchanged, len(p.Waves)+p.MoreWaves, records)
}

// planKey fingerprints what a plan depends on.
func (r *BaseReconciler) planKey(ctx context.Context, s *subject, in rolloutInput) (uint64, error) {
	_, lister, err := r.Factory.Get(ctx, s.gvr)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s/%d/%d/%d", in.generation, in.undoneFrom, in.policy.MaxChanging.String(), in.total, in.inForce, len(in.recordsOnly))
	for _, w := range in.recordsOnly {
		fmt.Fprintf(h, "|records %s/%t", w.name, w.bind)
	}
	for _, w := range in.todo {
		fmt.Fprintf(h, "|%s/%t/%t", w.name, w.bind, w.undo != nil)
		if obj, err := lister.ByNamespace(s.ref.Namespace).Get(w.name); err == nil {
			if m, err := meta.Accessor(obj); err == nil {
				fmt.Fprintf(h, "/%d/%s", m.GetGeneration(), m.GetAnnotations()[duck.BoundAnnotation])
			}
		}
	}
	for _, c := range in.changed {
		fmt.Fprintf(h, "|changing %s/%d/%d", c.name, c.change.Generation, c.change.Wave)
	}
	return h.Sum64(), nil
}

// computePlan is what resuming b's rollout would do: the waves the policy
// would take (planWaves), and, for the first duck.MaxPlanRead subjects in
// the order the waves take them, the change of each, computed with the
// binding step the waves run (b's Do or Undo, after the undone
// generation's Undo for an undo) on the subject read from the API server.
// Subjects with the same change are listed together.
func (r *BaseReconciler) computePlan(ctx, mctx context.Context, b Bindable, s *subject, in rolloutInput) *duck.PlanStatus {
	p := &duck.PlanStatus{Generation: in.generation, UndoneFrom: in.undoneFrom, Total: in.total, Unchanged: in.inForce,
		TemplateChanges: len(in.todo), RecordsOnly: len(in.recordsOnly)}
	for _, w := range append(slices.Clone(in.todo), in.recordsOnly...) {
		if w.bind {
			p.Bind++
		} else {
			p.Unbind++
		}
	}
	waves, first, more := planWaves(in, duck.MaxPlanWaves)
	p.MoreWaves = more
	for i, names := range waves {
		p.Waves = append(p.Waves, duck.PlanWave{Number: first + i, Count: len(names), Subjects: slices.Clone(names[:min(len(names), duck.MaxPlanWaveNames)])})
	}
	order := planOrder(in.todo, waves)
	changes := map[string]*duck.PlanChange{}
	for i, w := range order {
		if i == duck.MaxPlanRead {
			p.NotRead = len(order) - i
			break
		}
		patch, err := r.planSubject(ctx, mctx, b, s, w)
		if err != nil {
			if len(p.Errors) < 10 {
				p.Errors = append(p.Errors, duck.SubjectReason{Name: w.name, Reason: truncate(err.Error(), maxAPIMessage)})
			}
			continue
		}
		if patch == "" {
			continue // gone since the cache saw it
		}
		action := map[bool]string{true: "bind", false: "unbind"}[w.bind]
		c := changes[action+" "+patch]
		if c == nil {
			c = &duck.PlanChange{Action: action, Patch: patch}
			changes[action+" "+patch] = c
		}
		c.Count++
		c.Subjects = append(c.Subjects, w.name)
	}
	p.Changes, p.OtherChanges = boundChanges(changes)
	return p
}

// planOrder is the work in the order the plan's waves take it, then what
// no listed wave takes, by name.
func planOrder(todo []work, waves [][]string) []work {
	byName := make(map[string]work, len(todo))
	for _, w := range todo {
		byName[w.name] = w
	}
	out := make([]work, 0, len(todo))
	for _, names := range waves {
		for _, n := range names {
			out = append(out, byName[n])
			delete(byName, n)
		}
	}
	for _, w := range todo {
		if _, ok := byName[w.name]; ok {
			out = append(out, w)
		}
	}
	return out
}

// boundChanges orders changes (most subjects first) and keeps the first
// duck.MaxPlanChanges, each naming at most duck.MaxPlanNames subjects,
// sorted; it counts the subjects of the changes left out.
func boundChanges(changes map[string]*duck.PlanChange) ([]duck.PlanChange, int) {
	out := make([]duck.PlanChange, 0, len(changes))
	for _, c := range changes {
		slices.Sort(c.Subjects)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b duck.PlanChange) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Subjects[0], b.Subjects[0]))
	})
	other := 0
	for _, c := range out[min(len(out), duck.MaxPlanChanges):] {
		other += c.Count
	}
	out = out[:min(len(out), duck.MaxPlanChanges)]
	for i := range out {
		out[i].Subjects = out[i].Subjects[:min(len(out[i].Subjects), duck.MaxPlanNames)]
		if len(out[i].Patch) > duck.MaxPlanPatchBytes {
			out[i].Patch, out[i].Truncated = truncate(out[i].Patch, duck.MaxPlanPatchBytes), true
		}
	}
	return out, other
}

// planSubject is the change w makes of one subject, as a JSON patch of its
// object without bindkit's records: the binding step of the waves, on the
// subject as the API server's cache has it. It is "" for a subject that
// is gone.
func (r *BaseReconciler) planSubject(ctx, mctx context.Context, b Bindable, s *subject, w work) (string, error) {
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	u, err := client.Get(ctx, w.name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		u, err = client.Get(ctx, w.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	before, err := s.shape.FromUnstructured(u)
	if err != nil {
		return "", err
	}
	by := r.boundBy(b)
	if _, recorded := duck.BoundGeneration(before.Annotations, by); !w.bind && !recorded {
		return "[]", nil // only records to remove
	}
	_, ops, err := bindingStep(s.shape, before, applications(mctx, b, by, w, false)...)
	if p, ok := errors.AsType[*PanicError](err); ok {
		return "", fmt.Errorf("%s panicked: %v", p.Call, p.Value)
	}
	if err != nil {
		return "", err
	}
	if ops == nil {
		return "[]", nil
	}
	js, err := json.Marshal(ops)
	if err != nil {
		return "", err
	}
	return string(js), nil
}
