package psbinding

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
)

// What one reconcile's work does to one subject, found by running the
// binding step of the work, without bindkit's records, on the subject as
// read (changeOf). A rollout policy paces template changes only: a wave
// exists so that a changed pod template rolls out, health-gated, a few
// workloads at a time. A change that leaves the template (and the rest of
// the object but bindkit's records) as it is rolls nothing out: it is
// applied at once, with no wave, and a subject that already carries it
// under an earlier generation's record is not written at all, since every
// write of a Deployment's annotations moves its generation.
//
// The record stays the truth: a subject recording generation 4 of a
// Binding now at 5 whose change it carries (an edit of a field Do does
// not read, or one that sets the same values) holds exactly generation
// 4's change, which is generation 5's; the reconciler counts it in force.
// Admission and the audit read such a record as any record of an earlier
// generation. A later edit that changes the template moves the record
// with the template, in its wave.
type changeKind int

const (
	// templateChange: the work changes the subject beyond bindkit's
	// records (its pod template, as a rule); a rollout policy paces it.
	templateChange changeKind = iota
	// recordsOnly: the work changes only bindkit's records on the subject
	// (a subject not recording the Binding yet, or recording generation
	// 0, whose template holds the change); written at once, unpaced.
	recordsOnly
	// carried: the subject records an earlier generation of the Binding
	// and carries the current one's change: nothing is written.
	carried
)

// kindOfChange is the decision: templateOps counts the operations of the
// work's binding step on the subject without records; recorded and gen
// are the subject's bound record of the Binding, current the Binding's
// generation. Only a binding (not an unbinding, nor the Undo of an undone
// generation first) can be carried: its record then names a generation
// whose change is the current one's.
func kindOfChange(templateOps int, w work, recorded bool, gen, current int64) changeKind {
	switch {
	case templateOps > 0:
		return templateChange
	case w.bind && w.undo == nil && recorded && gen > 0 && gen < current:
		return carried
	}
	return recordsOnly
}

// verdictKey identifies a subject as a verdict was reached on it: its
// generation (which a change of its template moves) and its bound record.
type verdictKey struct {
	generation int64
	bound      string
}

// verdicts are the kinds of change found, per subject name, for one
// generation of one Binding.
type verdicts struct {
	generation int64
	of         map[string]verdict
}

type verdict struct {
	key  verdictKey
	kind changeKind
}

// verdictOf returns what was found of subject name for b's generation,
// when it was found at key.
func (g *generations) verdictOf(b Bindable, name string, key verdictKey) (changeKind, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.verdicts[b.GetUID()]
	if v == nil || v.generation != b.GetGeneration() {
		return 0, false
	}
	got, ok := v.of[name]
	return got.kind, ok && got.key == key
}

// setVerdict records what was found of subject name, at key, for b's
// generation; those of another generation go.
func (g *generations) setVerdict(b Bindable, name string, key verdictKey, kind changeKind) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.verdicts == nil {
		g.verdicts = map[types.UID]*verdicts{}
	}
	v := g.verdicts[b.GetUID()]
	if v == nil || v.generation != b.GetGeneration() {
		v = &verdicts{generation: b.GetGeneration(), of: map[string]verdict{}}
		g.verdicts[b.GetUID()] = v
	}
	v.of[name] = verdict{key: key, kind: kind}
}

// keyOf is the verdictKey of a subject's metadata.
func keyOf(m metav1.Object) verdictKey {
	return verdictKey{generation: m.GetGeneration(), bound: m.GetAnnotations()[duck.BoundAnnotation]}
}

// knownCarried drops from todo the subjects found to carry b's change
// under an earlier generation's record, as the cache has them now, and
// counts them: they are in force, and nothing is written to them.
func (r *BaseReconciler) knownCarried(ctx context.Context, b Bindable, s *subject, todo []work) ([]work, int) {
	_, lister, err := r.Factory.Get(ctx, s.gvr)
	if err != nil {
		return todo, 0
	}
	n := 0
	rest := slices.DeleteFunc(slices.Clone(todo), func(w work) bool {
		obj, err := lister.ByNamespace(s.ref.Namespace).Get(w.name)
		if err != nil {
			return false
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if kind, ok := r.generations.verdictOf(b, w.name, keyOf(m)); ok && kind == carried {
			n++
			return true
		}
		return false
	})
	return rest, n
}

// splitRecordsOnly sorts the work of a paced reconcile by what it does
// (changeOf): the template changes stay in seen.todo, for the waves; the
// records-only ones go to seen.recordsOnly, written at once; the carried
// ones are counted in force and dropped (the caller has dropped those the
// verdicts knew of already, knownCarried). A subject held from b's
// generation stays with the template changes (its halt stands), as does
// one that cannot be read or whose binding step fails: its wave reports
// why. Each subject is read once per generation of b and of the subject
// (the verdicts).
func (r *BaseReconciler) splitRecordsOnly(ctx, mctx context.Context, b Bindable, s *subject, seen surveyed) surveyed {
	todo := seen.todo
	seen.todo = nil
	_, cached, _ := r.Factory.Get(ctx, s.gvr)
	for _, w := range todo {
		kind := templateChange
		if !slices.Contains(seen.held, w.name) {
			kind = r.changeOf(ctx, mctx, b, s, w, cached)
		}
		switch kind {
		case carried:
			seen.inForce++
		case recordsOnly:
			seen.recordsOnly = append(seen.recordsOnly, w)
		default:
			seen.todo = append(seen.todo, w)
		}
	}
	return seen
}

// changeOf is what w does to its subject: the verdict found for the
// subject as the cache has it, else the binding step's on the subject
// read (from the kube-apiserver's cache), recorded as a verdict. A subject
// that is gone, or cannot be read or bound, is a template change: its
// wave finds out.
func (r *BaseReconciler) changeOf(ctx, mctx context.Context, b Bindable, s *subject, w work, cached cache.GenericLister) changeKind {
	if cached != nil {
		if obj, err := cached.ByNamespace(s.ref.Namespace).Get(w.name); err == nil {
			if m, err := meta.Accessor(obj); err == nil {
				if kind, ok := r.generations.verdictOf(b, w.name, keyOf(m)); ok {
					return kind
				}
			}
		}
	}
	u, err := readSubject(ctx, r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace), w.name, true)
	if err != nil {
		return templateChange
	}
	before, err := s.shape.FromUnstructured(u)
	if err != nil {
		return templateChange
	}
	kind, err := stepChange(mctx, b, r.boundBy(b), s, w, before)
	if err != nil {
		return templateChange
	}
	r.generations.setVerdict(b, w.name, keyOf(u), kind)
	return kind
}

// stepChange runs w's binding step, without records, on before, the
// subject that records b as by: the kind of change it makes.
func stepChange(mctx context.Context, b Bindable, by duck.BoundBy, s *subject, w work, before *duck.WithPod) (changeKind, error) {
	_, ops, err := bindingStep(s.shape, before, applications(mctx, b, by, w, false)...)
	if err != nil {
		return templateChange, err
	}
	gen, recorded := duck.BoundGeneration(before.Annotations, by)
	return kindOfChange(len(ops), w, recorded, gen, b.GetGeneration()), nil
}

// carriedAlready reports whether w binds a subject, read as before, that
// records an earlier generation of b whose change it carries: then
// nothing is written (a records-only patch would move a Deployment's
// generation for nothing), and the verdict lets later reconciles count
// it in force without reading it (knownCarried).
func (r *BaseReconciler) carriedAlready(mctx context.Context, b Bindable, by duck.BoundBy, s *subject, w work, before *duck.WithPod) bool {
	gen, recorded := duck.BoundGeneration(before.Annotations, by)
	if !w.bind || w.undo != nil || !recorded || gen <= 0 || gen >= b.GetGeneration() {
		return false
	}
	kind, err := stepChange(mctx, b, by, s, w, before)
	if err != nil || kind != carried {
		return false
	}
	r.generations.setVerdict(b, w.name, keyOf(before), carried)
	return true
}
