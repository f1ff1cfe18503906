package psbinding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// namespacesGVR is the resource of the namespaces whose labels opt subjects
// out or in.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// unavailableError is a problem that belongs in the Ready condition: reason
// is the condition's reason, retry what Reconcile returns for it.
type unavailableError struct {
	reason string
	err    error
	retry  error
}

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

func unavailable(reason string, err, retry error) error {
	return &unavailableError{reason: reason, err: err, retry: retry}
}

// subject is a resolved subject reference: what to select, of which kind.
type subject struct {
	ref   tracker.Reference
	gvk   schema.GroupVersionKind
	gvr   schema.GroupVersionResource
	shape duck.Shape
}

// key names the subject called name of s's resource and namespace.
func (s *subject) key(name string) subjectKey {
	return subjectKey{gvr: s.gvr, namespace: s.ref.Namespace, name: name}
}

// reconcileBinding brings b's subjects in line with b and records the
// outcome in b's Ready condition.
func (r *BaseReconciler) reconcileBinding(ctx context.Context, b Bindable) error {
	status := b.GetBindingStatus()
	report := func(err error) error {
		if ro, ok := errors.AsType[*rollingOut](err); ok {
			// Paced by a rollout policy: progress, not a failure.
			status.MarkBindingUnavailable(ro.reason, ro.message)
			if ro.retry > 0 {
				return controller.NewRequeueAfter(ro.retry)
			}
			return nil
		}
		if u, ok := errors.AsType[*unavailableError](err); ok {
			status.MarkBindingUnavailable(u.reason, u.Error())
			r.warn(ctx, b, u.reason, err)
			return u.retry
		}
		return err
	}

	// Undone, the subjects are those of the generation the undo restores.
	target, undone, undoErr := undoTarget(b)
	if undoErr != nil {
		target = b
	}
	current, refErr := r.resolveSubject(target)
	kinds, err := r.recordKinds(ctx, b, current)
	if err != nil {
		return err // a conflict on the Binding itself: requeued quietly
	}
	mctx, ctxErr := r.bindingContext(ctx, b)
	if ctxErr != nil {
		return report(ctxErr)
	}
	// What the Binding bound of kinds it no longer names is unbound first,
	// whatever state the current reference is in.
	if err := r.unbindOtherKinds(ctx, mctx, b, kinds, current); err != nil {
		return report(err)
	}
	if refErr != nil {
		return report(refErr)
	}
	if err := r.gateNamespace(ctx, b, current); err != nil {
		return report(err)
	}
	if r.SubResourcesReconciler != nil {
		err := containErr(b, "SubResourcesReconciler.Reconcile", "", func() error { return r.SubResourcesReconciler.Reconcile(ctx, b) })
		if _, ok := errors.AsType[*PanicError](err); ok {
			return report(unavailable(ReasonBindingPanicked, err, err))
		}
		if err != nil {
			return report(unavailable(ReasonSubResourcesFailed, fmt.Errorf("%s: sub-resources: %w", describe(b), err), err))
		}
	}
	if r.admissionOnly(current.gvk.GroupKind()) {
		status.MarkBindingUnavailable(ReasonBoundAtAdmissionOnly,
			fmt.Sprintf("%s cannot change its pod template in place; it is bound when created", current.gvr.GroupResource()))
		return nil
	}
	if undoErr != nil {
		return report(undoErr)
	}
	err = r.reconcileSubjects(ctx, mctx, target, undone, current)
	if undone != nil {
		copyReport(target, b)
	}
	if err != nil {
		return report(err)
	}
	status.MarkBindingAvailable()
	return nil
}

// resolveSubject validates b's subject reference and maps its kind to a
// resource. The error is an *unavailableError.
func (r *BaseReconciler) resolveSubject(b Bindable) (*subject, error) {
	ref := subjectOfBindable(b)
	if err := ref.Validate(); err != nil {
		err = fmt.Errorf("%s: subject %s: %w", describe(b), ref, err)
		return nil, unavailable(ReasonSubjectInvalid, err, controller.NewPermanentError(err))
	}
	if err := checkSubjectNamespace(b.GetNamespace(), b.GetName(), ref); err != nil {
		return nil, unavailable(ReasonSubjectOutsideNamespace, err, controller.NewPermanentError(err))
	}
	gvk, _ := ref.GroupVersionKind()
	mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		err = fmt.Errorf("%s: subject %s: kind %s is not served by the API server", describe(b), ref, gvk)
		return nil, unavailable(ReasonSubjectKindNotFound, err, controller.NewRequeueAfter(kindNotFoundRetry))
	}
	if err != nil {
		err = fmt.Errorf("%s: subject %s: map kind to resource: %w", describe(b), ref, err)
		return nil, unavailable(ReasonSubjectsUnavailable, err, err)
	}
	return &subject{ref: ref, gvk: gvk, gvr: mapping.Resource, shape: r.Shapes.For(gvk.GroupKind())}, nil
}

// bindingContext calls WithContext, once per reconcile.
func (r *BaseReconciler) bindingContext(ctx context.Context, b Bindable) (context.Context, error) {
	if r.WithContext == nil {
		return ctx, nil
	}
	mctx, err := callWithContext(ctx, r.WithContext, b)
	if _, ok := errors.AsType[*PanicError](err); ok {
		return nil, unavailable(ReasonBindingPanicked, err, err)
	}
	if err != nil {
		err = fmt.Errorf("%s: prepare Do and Undo: %w", describe(b), err)
		return nil, unavailable(ReasonContextFailed, err, err)
	}
	return mctx, nil
}

// observer identifies b to the tracker by its kind and name.
func (r *BaseReconciler) observer(b Bindable) (tracker.Observer, error) {
	gvk, err := r.Mapper.KindFor(r.GVR)
	if err != nil {
		return tracker.Observer{}, fmt.Errorf("%s: binding resource %s: %w", describe(b), r.GVR, err)
	}
	return tracker.Observer{GroupKind: gvk.GroupKind(), NamespacedName: types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}}, nil
}

// gateNamespace tracks b's namespace, so a change of its labels reconciles
// b, and reports an *unavailableError when its labels keep Bindings out.
func (r *BaseReconciler) gateNamespace(ctx context.Context, b Bindable, s *subject) error {
	observer, err := r.observer(b)
	if err != nil {
		return err
	}
	nsRef := tracker.Reference{APIVersion: "v1", Kind: "Namespace", Name: s.ref.Namespace}
	if err := r.Tracker.TrackReference(nsRef, observer); err != nil {
		return fmt.Errorf("%s: track namespace %s: %w", describe(b), s.ref.Namespace, err)
	}
	nsLabels, err := r.namespaceLabels(ctx, s.ref.Namespace)
	if err != nil {
		err = fmt.Errorf("%s: namespace %s: %w", describe(b), s.ref.Namespace, err)
		return unavailable(ReasonSubjectsUnavailable, err, err)
	}
	switch {
	case r.excluded(s.ref.Namespace):
		err := fmt.Errorf("namespace %s is never acted in: it is the webhook's own namespace, or one of the cluster's (%s) that the webhook is not called in", s.ref.Namespace, strings.Join(KubeNamespaces, ", "))
		return unavailable(ReasonNamespaceExcluded, err, nil)
	case nsLabels[ExcludeLabel] == "true":
		err := fmt.Errorf("namespace %s is labelled %s=true: no Binding acts in it", s.ref.Namespace, ExcludeLabel)
		return unavailable(ReasonNamespaceExcluded, err, nil)
	case r.SelectorMode == InclusionMode && nsLabels[IncludeLabel] != "true":
		err := fmt.Errorf("namespace %s is not labelled %s=true: in inclusion mode Bindings act only in namespaces that opt in", s.ref.Namespace, IncludeLabel)
		return unavailable(ReasonNamespaceNotIncluded, err, nil)
	}
	return nil
}

func (r *BaseReconciler) namespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	if r.NamespaceLister != nil {
		ns, err := r.NamespaceLister.Get(namespace)
		if err != nil {
			return nil, err
		}
		return ns.Labels, nil
	}
	_, lister, err := r.Factory.Get(ctx, namespacesGVR)
	if err != nil {
		return nil, err
	}
	obj, err := lister.Get(namespace)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	return m.GetLabels(), nil
}

// admissionOnly reports whether gk cannot change its pod template in place.
func (r *BaseReconciler) admissionOnly(gk schema.GroupKind) bool {
	kinds := r.AdmissionOnly
	if kinds == nil {
		kinds = defaultAdmissionOnly
	}
	return slices.Contains(kinds, gk)
}

// defaultAdmissionOnly are the kinds whose pod template cannot change in
// place: bare Pods and Jobs.
var defaultAdmissionOnly = []schema.GroupKind{{Group: "", Kind: "Pod"}, {Group: "batch", Kind: "Job"}}

// work is what one reconcile does to one subject.
type work struct {
	name string
	bind bool // Do, else Undo
	// paced is the change a wave under a rollout policy makes, recorded on
	// the subject with it (duck.RolloutAnnotation); nil for work no policy
	// paces. rollback keeps, with it, how to take it back.
	paced    *duck.Change
	rollback bool
	// undo, set while the Binding is undone (RolloutUndoAnnotation), is
	// the Binding at the generation undone, for a subject that carries a
	// generation other than the one restored: its Undo runs before the
	// restored generation's Do (for an unbinding, instead of its Undo).
	undo Bindable
}

// reconcileSubjects tracks s, then binds the selected subjects that do not
// record b at its generation and unbinds those that record b but are no
// longer selected, paced by b's rollout policy when it has one. While an
// undo restores b's generation, undone is the Binding at the generation
// undone (undoTarget), whose Undo runs first on a subject that carries
// another generation than b's.
func (r *BaseReconciler) reconcileSubjects(ctx, mctx context.Context, b, undone Bindable, s *subject) error {
	observer, err := r.observer(b)
	if err != nil {
		return err
	}
	if err := r.Tracker.TrackReference(s.ref, observer); err != nil {
		return fmt.Errorf("%s: subject %s: track: %w", describe(b), s.ref, err)
	}
	seen, err := r.survey(ctx, b, undone, s)
	if err != nil {
		return err
	}
	// The policy and the controls are the Binding's own, undone or not.
	ctl, self := controls{}, b
	if undone != nil {
		ctl.undoneFrom, ctl.restoredWave, self = undone.GetGeneration(), seen.restoredWave, undone
	}
	ctl.paused, _, _ = controlsOf(self)
	policy, err := r.rolloutPolicy(self)
	if err != nil {
		err = fmt.Errorf("%s: %w", describe(b), err)
		return unavailable(ReasonRolloutPolicyInvalid, err, controller.NewPermanentError(err))
	}
	todo := seen.todo
	var pacing error
	switch {
	case policy.Enabled():
		if todo, pacing = r.pace(ctx, mctx, b, s, policy, seen, ctl); todo == nil && pacing != nil {
			if _, ok := pacing.(*rollingOut); !ok {
				return pacing
			}
		}
	case len(todo) > 0:
		// No policy: a burst of edits reaches the subjects at most twice,
		// at its first edit and its last.
		if wait := r.generations.quietFor(b, policy.Quiet, time.Now(), false); wait > 0 {
			return &rollingOut{reason: ReasonRollingOut, retry: wait,
				message: fmt.Sprintf("generation %d: waiting %v for edits to settle", b.GetGeneration(), wait.Round(time.Millisecond))}
		}
	}
	if !policy.Enabled() {
		// No policy: no plan to publish; the last rollout reported stays,
		// the report a policy turned on again starts from.
		clearPlan(b)
		r.observeState(ctx, b, "")
	}
	patched, err := r.patchSubjects(ctx, mctx, b, s, todo)
	r.observerIn(ctx).SubjectsBound(r.GVR.GroupResource(), types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}, seen.inForce+patched)
	if err != nil {
		return err
	}
	return pacing
}

// surveyed is what a reconcile found of b's subjects in the cache.
type surveyed struct {
	// todo binds the selected subjects that do not record b at its
	// generation and unbinds those that record b but are not selected,
	// sorted by name.
	todo []work
	// changed are the subjects whose records hold a paced change of b,
	// sorted by name.
	changed []changedSubject
	// restoredWave, for an undo, is the last wave of the generation it
	// restores.
	restoredWave int
	// held are the subjects held from b's generation (HeldAnnotation):
	// rolled back by a halt of it, which a leader may not have reported.
	held []string
	// selected counts the subjects selected; inForce those of them that
	// record b at its generation.
	selected, inForce int
}

// survey reads from the cache the subjects s selects and those whose
// records name b; undone, while an undo restores b's generation, is the
// Binding at the generation undone. Subjects being deleted or labelled ExcludeLabel are left
// as they are.
func (r *BaseReconciler) survey(ctx context.Context, b, undone Bindable, s *subject) (surveyed, error) {
	inf, lister, err := r.Factory.Get(ctx, s.gvr)
	if err != nil {
		err = fmt.Errorf("%s: subject %s: informer: %w", describe(b), s.ref, err)
		return surveyed{}, unavailable(ReasonSubjectsUnavailable, err, err)
	}
	by := r.boundBy(b)
	var out surveyed
	selected := map[string]bool{}
	consider := func(obj any, isSelected bool) {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetDeletionTimestamp() != nil || m.GetLabels()[ExcludeLabel] == "true" {
			return // being deleted, or opted out: left as it is
		}
		// Most subjects carry no rollout or hold record: parsing nothing
		// would still allocate, once per subject per reconcile.
		ann := m.GetAnnotations()
		if duck.NewerRecords(ann, by) != nil {
			return // a newer bindkit's record of b: left as it is (duck.RecordFormat)
		}
		if _, has := ann[duck.RolloutAnnotation]; has {
			if c, ok := duck.ChangesOf(ann).Lookup(by); ok {
				out.changed = append(out.changed, changedSubject{name: m.GetName(), change: c})
				if undone != nil && c.Generation == b.GetGeneration() {
					out.restoredWave = max(out.restoredWave, c.Wave)
				}
			}
		}
		if _, has := ann[duck.HeldAnnotation]; has {
			if gen, ok := duck.HeldOf(ann).Lookup(by); ok && gen == b.GetGeneration() {
				out.held = append(out.held, m.GetName())
			}
		}
		gen, recorded := duck.BoundGeneration(m.GetAnnotations(), by)
		w := work{name: m.GetName(), bind: isSelected}
		if undone != nil && recorded && gen != b.GetGeneration() {
			w.undo = undone
		}
		switch {
		case isSelected && (!recorded || gen != b.GetGeneration()):
			out.todo = append(out.todo, w)
		case isSelected:
			out.inForce++
		case recorded:
			out.todo = append(out.todo, w)
		}
	}
	objs, err := selectedObjects(b, s, lister)
	if err != nil {
		return surveyed{}, err
	}
	for _, obj := range objs {
		if m, err := meta.Accessor(obj); err == nil {
			selected[m.GetName()] = true
		}
		consider(obj, true)
	}
	// Subjects whose records name b but are no longer selected:
	// relabelled, or the reference changed.
	named, err := inf.GetIndexer().ByIndex(duck.BoundIndex, duck.BoundIndexKey(b.GetNamespace(), by))
	if err != nil {
		return surveyed{}, fmt.Errorf("%s: subjects it bound: %w", describe(b), err)
	}
	for _, obj := range named {
		if m, err := meta.Accessor(obj); err == nil && !selected[m.GetName()] {
			consider(obj, false)
		}
	}
	out.selected = len(selected)
	slices.SortFunc(out.todo, func(a, b work) int { return cmp.Compare(a.name, b.name) })
	slices.SortFunc(out.changed, func(a, b changedSubject) int { return cmp.Compare(a.name, b.name) })
	slices.Sort(out.held)
	return out, nil
}

// selectedObjects lists from the cache the subjects s selects: the one it
// names (none yet is no error: admission binds it when it is created), or
// those its selector matches.
func selectedObjects(b Bindable, s *subject, lister cache.GenericLister) ([]runtime.Object, error) {
	if s.ref.Name != "" {
		obj, err := lister.ByNamespace(s.ref.Namespace).Get(s.ref.Name)
		if err != nil {
			return nil, nil
		}
		return []runtime.Object{obj}, nil
	}
	sel, err := s.ref.LabelSelector()
	if err != nil {
		err = fmt.Errorf("%s: subject %s: %w", describe(b), s.ref, err)
		return nil, unavailable(ReasonSubjectInvalid, err, controller.NewPermanentError(err))
	}
	objs, err := lister.ByNamespace(s.ref.Namespace).List(sel)
	if err != nil {
		err = fmt.Errorf("%s: subject %s: list: %w", describe(b), s.ref, err)
		return nil, unavailable(ReasonSubjectsUnavailable, err, err)
	}
	return objs, nil
}

// unbindOtherKinds unbinds, of every kind b records it bound except the
// current one, the subjects that record b, and then forgets those kinds.
func (r *BaseReconciler) unbindOtherKinds(ctx, mctx context.Context, b Bindable, kinds []schema.GroupVersionKind, current *subject) error {
	var done []schema.GroupVersionKind
	for _, gvk := range kinds {
		if current != nil && gvk.GroupKind() == current.gvk.GroupKind() {
			continue
		}
		if err := r.unbindAll(ctx, mctx, b, gvk, false); err != nil {
			return err
		}
		done = append(done, gvk)
	}
	if len(done) == 0 {
		return nil
	}
	return r.forgetKinds(ctx, b, done)
}

// unbindAll unbinds every subject of kind gvk that records b, except,
// unless everything is set (an uninstall), those of an excluded namespace
// or labelled ExcludeLabel, which are left as they are. A kind the server
// no longer serves has nothing to unbind; a version it no longer serves is
// read through another.
func (r *BaseReconciler) unbindAll(ctx, mctx context.Context, b Bindable, gvk schema.GroupVersionKind, everything bool) error {
	gk := gvk.GroupKind()
	if r.admissionOnly(gk) {
		return nil // never bound by the reconciler, and immutable anyway
	}
	mapping, err := r.Mapper.RESTMapping(gk, gvk.Version)
	if meta.IsNoMatchError(err) {
		mapping, err = r.Mapper.RESTMapping(gk)
	}
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s: map kind to resource: %w", describe(b), gk, err)
	}
	s := &subject{gvk: mapping.GroupVersionKind, gvr: mapping.Resource, shape: r.Shapes.For(gk), ref: tracker.Reference{Namespace: b.GetNamespace()}}
	if !everything {
		if r.excluded(b.GetNamespace()) {
			return nil
		}
		nsLabels, err := r.namespaceLabels(ctx, b.GetNamespace())
		if err == nil && (nsLabels[ExcludeLabel] == "true" || (r.SelectorMode == InclusionMode && nsLabels[IncludeLabel] != "true")) {
			return nil
		}
	}
	inf, _, err := r.Factory.Get(ctx, s.gvr)
	if err != nil {
		return fmt.Errorf("%s: %s: informer: %w", describe(b), s.gvr.GroupResource(), err)
	}
	bound, err := inf.GetIndexer().ByIndex(duck.BoundIndex, duck.BoundIndexKey(b.GetNamespace(), r.boundBy(b)))
	if err != nil {
		return fmt.Errorf("%s: subjects it bound: %w", describe(b), err)
	}
	var todo []work
	for _, obj := range bound {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetDeletionTimestamp() != nil || (!everything && m.GetLabels()[ExcludeLabel] == "true") {
			continue
		}
		todo = append(todo, work{name: m.GetName()})
	}
	slices.SortFunc(todo, func(a, b work) int { return cmp.Compare(a.name, b.name) })
	_, err = r.patchSubjects(ctx, mctx, b, s, todo)
	return err
}

// reconcileDeletion unbinds every subject b bound (in waves, under a
// policy that paces deletion), removes every record of b from its
// subjects, runs the SubResourcesReconciler's ReconcileDeletion and lets b
// go.
func (r *BaseReconciler) reconcileDeletion(ctx context.Context, b Bindable) error {
	if !r.hasFinalizer(b) {
		r.generations.forget(b.GetUID())
		return nil
	}
	kinds := recordedKinds(b)
	current, err := r.resolveSubject(b)
	if err == nil && !slices.ContainsFunc(kinds, sameKind(current.gvk)) {
		kinds = append(kinds, current.gvk) // never recorded: a Binding from before the record
	}
	if len(kinds) > 0 {
		mctx, err := r.bindingContext(ctx, b)
		if err != nil {
			r.warn(ctx, b, reasonUnbindFailed, err)
			return err
		}
		if current != nil {
			if err := r.paceUnbinding(ctx, mctx, b, current); err != nil {
				return err
			}
		}
		for _, gvk := range kinds {
			if err := r.unbindAll(ctx, mctx, b, gvk, false); err != nil {
				r.warn(ctx, b, reasonUnbindFailed, err)
				return err
			}
		}
	}
	if r.SubResourcesReconciler != nil {
		err := containErr(b, "SubResourcesReconciler.ReconcileDeletion", "", func() error { return r.SubResourcesReconciler.ReconcileDeletion(ctx, b) })
		if _, ok := errors.AsType[*PanicError](err); ok {
			r.warn(ctx, b, ReasonBindingPanicked, err)
			return err
		}
		if err != nil {
			err = fmt.Errorf("%s: sub-resources deletion: %w", describe(b), err)
			r.warn(ctx, b, ReasonSubResourcesFailed, err)
			return err
		}
	}
	if err := r.removeFinalizer(ctx, b); err != nil {
		r.warn(ctx, b, reasonFinalizerUpdateFailed, err)
		return err
	}
	r.generations.forget(b.GetUID())
	r.observerIn(ctx).SubjectsBound(r.GVR.GroupResource(), types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}, 0)
	r.observeState(ctx, b, "")
	return nil
}

// paceUnbinding unbinds, under a rollout policy that paces deletion
// (RolloutPolicy.PaceDeletion), the subjects of s that record b, wave by
// wave; it returns a *rollingOut until the last wave has rolled out. A
// halt stops it without rolling anything back. Without such a policy, or
// for a kind bound at admission only, it does nothing: unbindAll unbinds
// everything at once.
func (r *BaseReconciler) paceUnbinding(ctx, mctx context.Context, b Bindable, s *subject) error {
	policy, err := r.rolloutPolicy(b)
	if err != nil || !policy.Enabled() || !policy.PaceDeletion || r.admissionOnly(s.gvk.GroupKind()) {
		return nil
	}
	policy.Rollback = false
	inf, _, err := r.Factory.Get(ctx, s.gvr)
	if err != nil {
		return fmt.Errorf("%s: %s: informer: %w", describe(b), s.gvr.GroupResource(), err)
	}
	by := r.boundBy(b)
	named, err := inf.GetIndexer().ByIndex(duck.BoundIndex, duck.BoundIndexKey(b.GetNamespace(), by))
	if err != nil {
		return fmt.Errorf("%s: subjects it bound: %w", describe(b), err)
	}
	var todo []work
	var changed []changedSubject
	total, unbound := 0, 0
	for _, obj := range named {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetDeletionTimestamp() != nil || m.GetLabels()[ExcludeLabel] == "true" {
			continue
		}
		c, hasChange := duck.ChangesOf(m.GetAnnotations()).Lookup(by)
		_, recorded := duck.BoundGeneration(m.GetAnnotations(), by)
		switch {
		case recorded:
			todo = append(todo, work{name: m.GetName()})
		case hasChange && c.Generation == b.GetGeneration():
			unbound++ // unbound by an earlier wave of this deletion
		default:
			continue
		}
		total++
		if hasChange {
			changed = append(changed, changedSubject{name: m.GetName(), change: c})
		}
	}
	slices.SortFunc(todo, func(a, b work) int { return cmp.Compare(a.name, b.name) })
	slices.SortFunc(changed, func(a, b changedSubject) int { return cmp.Compare(a.name, b.name) })
	wave, pacing := r.pace(ctx, mctx, b, s, policy, surveyed{todo: todo, changed: changed, selected: total, inForce: unbound}, controls{})
	if wave == nil {
		return pacing // done (nil), or waiting, or halted
	}
	if _, err := r.patchSubjects(ctx, mctx, b, s, wave); err != nil {
		return err
	}
	return pacing
}
