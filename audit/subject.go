package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// subject audits the records of one subject.
func (a *auditor) subject(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	ann := u.GetAnnotations()
	s := &subjectRef{gvr: gvr, u: u, fixed: maps.Clone(ann), first: len(a.findings)}
	if err := a.records(ctx, s); err != nil {
		return err
	}
	a.fix(s)
	return nil
}

// records audits each record of s, correcting s.fixed as it goes.
func (a *auditor) records(ctx context.Context, s *subjectRef) error {
	u, ann := s.u, s.u.GetAnnotations()
	bound, err := duck.ParseBound(ann[duck.BoundAnnotation])
	s.bound = bound
	if err != nil {
		a.report(s, nil, duck.BoundAnnotation, ProblemUnreadable, err.Error(), dropUnreadable)
	}
	for _, by := range sortedKeys(bound) {
		if err := a.checkBound(ctx, s, by, bound[by]); err != nil {
			return err
		}
	}
	changes, err := duck.ParseChanges(ann[duck.RolloutAnnotation])
	if err != nil {
		a.report(s, nil, duck.RolloutAnnotation, ProblemUnreadable, err.Error(), dropUnreadable)
	}
	for _, by := range sortedKeys(changes) {
		b, err := a.lookup(ctx, by, u.GetNamespace())
		if err != nil {
			return err
		}
		switch {
		case a.gone(s, b, by, duck.RolloutAnnotation):
		case changes[by].Generation > b.obj.GetGeneration():
			a.report(s, &by, duck.RolloutAnnotation, ProblemAhead, fmt.Sprintf("records a paced change to generation %d; the Binding is at %d", changes[by].Generation, b.obj.GetGeneration()),
				func(m map[string]string) { duck.SetChange(m, by, nil) })
		}
	}
	held, err := duck.ParseBound(ann[duck.HeldAnnotation])
	if err != nil {
		a.report(s, nil, duck.HeldAnnotation, ProblemUnreadable, err.Error(), dropUnreadable)
	}
	for _, by := range sortedKeys(held) {
		b, err := a.lookup(ctx, by, u.GetNamespace())
		if err != nil {
			return err
		}
		if a.gone(s, b, by, duck.HeldAnnotation) || held[by] == b.obj.GetGeneration() || !b.rollout.Complete(b.obj.GetGeneration()) {
			continue
		}
		a.report(s, &by, duck.HeldAnnotation, ProblemStaleHold, fmt.Sprintf("held from generation %d, but the rollout of generation %d is complete", held[by], b.obj.GetGeneration()),
			func(m map[string]string) {
				h := duck.HeldOf(m)
				delete(h, by)
				duck.SetHeld(m, h)
			})
	}
	if err := a.checkRollbacks(ctx, s, bound); err != nil {
		return err
	}
	return a.checkNewer(ctx, s)
}

// dropUnreadable is the fix of an unreadable record: its entries no
// format reads go, the rest (a newer format's included) stay.
func dropUnreadable(m map[string]string) { duck.DropUnreadable(m) }

// checkNewer reports the records of a newer format than this bindkit's
// (duck.RecordFormat), once per Binding: the bindkit that wrote them can
// audit them, this one leaves them alone, as its controller does. A
// record of a Binding that is gone is reported as gone (it is, whatever
// its format).
func (a *auditor) checkNewer(ctx context.Context, s *subjectRef) error {
	ann := s.u.GetAnnotations()
	seen := map[duck.BoundBy]bool{}
	for _, key := range append(slices.Clone(duck.RecordAnnotations), duck.RollbackAnnotation) {
		for _, by := range newerIdentities(key, ann[key]) {
			if seen[by] {
				continue
			}
			seen[by] = true
			b, err := a.lookup(ctx, by, s.u.GetNamespace())
			if err != nil {
				return err
			}
			if !a.gone(s, b, by, key) {
				a.report(s, &by, key, ProblemNewerFormat, fmt.Sprintf("written in a newer record format than this bindkit's (%d), which it leaves alone: audit with the bindkit that wrote it", duck.RecordFormat), func(map[string]string) {})
			}
		}
	}
	return nil
}

// newerIdentities are the Bindings whose entries of a record annotation's
// value (a RollbackAnnotation's keys) are of a newer format, in order.
func newerIdentities(key, value string) []duck.BoundBy {
	var entries []string
	if key == duck.RollbackAnnotation {
		var raw map[string]json.RawMessage
		if json.Unmarshal([]byte(value), &raw) != nil {
			return nil
		}
		entries = slices.Sorted(maps.Keys(raw))
	} else {
		entries = strings.Split(value, ",")
	}
	var out []duck.BoundBy
	for _, e := range entries {
		if by, f := duck.EntryFormat(e); f > duck.RecordFormat {
			out = append(out, by)
		}
	}
	return out
}

// checkBound audits one entry of the bound record.
func (a *auditor) checkBound(ctx context.Context, s *subjectRef, by duck.BoundBy, gen int64) error {
	b, err := a.lookup(ctx, by, s.u.GetNamespace())
	if err != nil || a.gone(s, b, by, duck.BoundAnnotation) {
		return err
	}
	rebind := func(m map[string]string) {
		rest := duck.BoundOf(m)
		for e := range rest {
			if e.Matches(by) {
				delete(rest, e)
			}
		}
		duck.SetBound(m, rest)
	}
	if gen > b.obj.GetGeneration() {
		a.report(s, &by, duck.BoundAnnotation, ProblemAhead, fmt.Sprintf("records generation %d; the Binding is at %d", gen, b.obj.GetGeneration()), rebind)
		return nil
	}
	if why := a.contentDisagrees(ctx, s, b, gen, by, s.bound); why != "" {
		a.report(s, &by, duck.BoundAnnotation, ProblemContent, fmt.Sprintf("records generation %d but %s", gen, why), rebind)
	}
	return nil
}

// contentDisagrees runs the Binding's Do, at gen, on the subject where the
// audit can (the Binding's own Do when gen is its generation, its
// published Spec when gen is the published one): a change means the
// subject does not carry what it records, unless another Binding the
// subject records sets the same thing its own way (two Bindings that set
// one variable: the last to bind wins, and both records are the truth),
// or might: another recorded Binding whose Do the audit cannot run (a
// declarative one that has not published the generation recorded yet,
// bound in the same patch as this one) may be the one whose value the
// subject carries, and a finding the audit cannot prove is not made.
func (a *auditor) contentDisagrees(ctx context.Context, s *subjectRef, b *binding, gen int64, by duck.BoundBy, bound duck.Bound) string {
	do := doOf(ctx, b, gen)
	if do == nil {
		return ""
	}
	shape := duck.Shapes{}.For(s.u.GroupVersionKind().GroupKind())
	before, err := shape.FromUnstructured(s.u)
	if err != nil {
		return ""
	}
	after, changed := run(do, before)
	if !changed {
		return ""
	}
	for _, other := range sortedKeys(bound) {
		if other == by {
			continue
		}
		ob, err := a.lookup(ctx, other, s.u.GetNamespace())
		if err != nil || ob.obj == nil {
			continue
		}
		odo := doOf(ctx, ob, bound[other])
		if odo == nil {
			return "" // other's change, unknown here, may be over b's
		}
		if restored, _ := run(odo, after); equality.Semantic.DeepEqual(before.Spec.Template, restored.Spec.Template) {
			return "" // other's change is over b's
		}
	}
	ops, err := shape.CreatePatch(before, after)
	if err != nil || len(ops) == 0 {
		return ""
	}
	paths := make([]string, 0, min(3, len(ops)))
	for _, op := range ops[:min(3, len(ops))] {
		paths = append(paths, op.Path)
	}
	return "does not carry its change: Do would change " + strings.Join(paths, ", ")
}

// doOf is b's Do at generation gen, when the audit can run it: the
// Binding's own at its generation, its published Spec's at the published
// one; nil otherwise. Each call of the Binding's own Do gets a copy of the
// Binding, as on the framework's paths: b.bindable is read once per Run,
// for every subject that records it.
func doOf(ctx context.Context, b *binding, gen int64) func(*duck.WithPod) {
	switch {
	case b.bindable != nil && gen == b.obj.GetGeneration():
		return func(wp *duck.WithPod) {
			if own, ok := b.bindable.DeepCopyObject().(psbinding.Bindable); ok {
				own.Do(ctx, wp)
			}
		}
	case b.declared != nil && gen == b.published:
		return b.declared.Do
	}
	return nil
}

// run applies do to a copy of wp and says whether it changed the pod
// template; a Do that panics changes nothing the audit can judge.
func run(do func(*duck.WithPod), wp *duck.WithPod) (after *duck.WithPod, changed bool) {
	after = wp.DeepCopy()
	panicked := false
	func() {
		defer func() { panicked = recover() != nil }()
		do(after)
	}()
	return after, !panicked && !equality.Semantic.DeepEqual(wp.Spec.Template, after.Spec.Template)
}

// checkRollbacks audits the rollback records: each must undo the
// generation the subject carries of its Binding.
func (a *auditor) checkRollbacks(ctx context.Context, s *subjectRef, bound duck.Bound) error {
	ann := s.u.GetAnnotations()
	rbs, err := duck.RollbacksOf(ann)
	if err != nil {
		a.report(s, nil, duck.RollbackAnnotation, ProblemUnreadable, err.Error(), dropUnreadable)
	}
	for _, key := range slices.Sorted(maps.Keys(rbs)) {
		by, gen, ok := duck.ParseEntry(key)
		if !ok {
			continue
		}
		b, err := a.lookup(ctx, by, s.u.GetNamespace())
		if err != nil {
			return err
		}
		if a.gone(s, b, by, duck.RollbackAnnotation) {
			continue
		}
		if carried, ok := bound.Lookup(by); !ok || carried != gen {
			a.report(s, &by, duck.RollbackAnnotation, ProblemStaleRollback, fmt.Sprintf("undoes generation %d, which the subject does not carry", gen),
				func(m map[string]string) { duck.SetRollback(m, by, 0, nil) })
		}
	}
	return nil
}

// gone reports (once per subject and Binding) and says whether b, which a
// record of annotation names as by, is gone: no such Binding, or one of
// another UID.
func (a *auditor) gone(s *subjectRef, b *binding, by duck.BoundBy, annotation string) bool {
	if b.obj != nil && (by.UID == "" || b.obj.GetUID() == by.UID) {
		return false
	}
	for _, f := range a.findings {
		if f.Problem == ProblemGone && f.namespace == s.u.GetNamespace() && f.name == s.u.GetName() && f.gvr == s.gvr && f.Binding == describeBinding(by, s.u.GetNamespace()) {
			return true
		}
	}
	why := "no such Binding"
	if b.obj != nil {
		why = fmt.Sprintf("the Binding of that name has UID %s, not %s: it was deleted and created again", b.obj.GetUID(), by.UID)
	}
	a.report(s, &by, annotation, ProblemGone, "records of a Binding that is gone: "+why, func(m map[string]string) { duck.Forget(m, by) })
	return true
}

// subjectRef is the subject being audited: fixed is its annotations as
// the corrections of its findings so far leave them; its findings are
// a.findings[first:].
type subjectRef struct {
	gvr   schema.GroupVersionResource
	u     *unstructured.Unstructured
	fixed map[string]string
	first int
	bound duck.Bound // the subject's bound record, as read
}

// report adds a finding, and applies correct to s.fixed.
func (a *auditor) report(s *subjectRef, by *duck.BoundBy, annotation, problem, detail string, correct func(map[string]string)) {
	if s.fixed == nil {
		s.fixed = map[string]string{}
	}
	correct(s.fixed)
	f := Finding{
		Subject:    fmt.Sprintf("%s %s %s/%s", s.u.GetAPIVersion(), s.u.GetKind(), s.u.GetNamespace(), s.u.GetName()),
		Annotation: annotation, Problem: problem, Detail: detail,
		gvr: s.gvr, namespace: s.u.GetNamespace(), name: s.u.GetName(),
	}
	if by != nil {
		f.Binding = describeBinding(*by, s.u.GetNamespace())
	}
	a.findings = append(a.findings, f)
}

// fix gives every finding of s one fix, that of all of them: the record
// annotations as s.fixed has them. Fixes of one subject computed apart
// would each rewrite the same annotation from the same old value.
func (a *auditor) fix(s *subjectRef) {
	if len(a.findings) == s.first {
		return
	}
	fix := map[string]any{}
	for _, key := range append(slices.Clone(duck.RecordAnnotations), duck.RollbackAnnotation) {
		if old, now := s.u.GetAnnotations()[key], s.fixed[key]; old != now {
			fix[key] = orNil(now)
		}
	}
	if len(fix) == 0 {
		return // records left alone (ProblemNewerFormat): nothing to send
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": fix}})
	cmd := fmt.Sprintf("kubectl -n %s patch %s %s --type=merge -p '%s'", s.u.GetNamespace(), resourceName(s.gvr), s.u.GetName(), patch)
	for i := s.first; i < len(a.findings); i++ {
		a.findings[i].Fix, a.findings[i].FixCommand = patch, cmd
	}
}

// resourceName is how kubectl names gvr: "deployments.apps".
func resourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

func describeBinding(by duck.BoundBy, ns string) string {
	return by.Resource.String() + " " + ns + "/" + by.Name
}

// orNil is v, or nil (a merge patch's removal) when v is empty.
func orNil(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// sortedKeys orders a record's Bindings, for stable findings.
func sortedKeys[V any](m map[duck.BoundBy]V) []duck.BoundBy {
	return slices.SortedFunc(maps.Keys(m), func(x, y duck.BoundBy) int { return strings.Compare(x.String(), y.String()) })
}
