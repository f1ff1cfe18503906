package psbinding

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// maxPatchAttempts bounds how often one subject is re-read and re-patched
// when it changed under the reconciler.
const maxPatchAttempts = 5

// unavailableError is a subject problem that belongs in the Ready condition:
// reason is the condition's reason, retry what Reconcile returns for it.
type unavailableError struct {
	reason string
	err    error
	retry  error
}

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// resolveSubject validates b's subject reference, maps its kind to a
// resource and tracks it, so that a change to a subject reconciles b.
func (r *BaseReconciler) resolveSubject(ctx context.Context, b Bindable) (tracker.Reference, schema.GroupVersionResource, error) {
	ref, _, _ := subjectOfBindable(b)
	if err := ref.Validate(); err != nil {
		err = fmt.Errorf("subject %s: %w", ref, err)
		return ref, schema.GroupVersionResource{}, &unavailableError{reason: ReasonSubjectInvalid, err: err, retry: controller.NewPermanentError(err)}
	}
	if err := checkSubjectNamespace(b.GetNamespace(), b.GetName(), ref); err != nil {
		return ref, schema.GroupVersionResource{}, &unavailableError{reason: ReasonSubjectOutsideNamespace, err: err, retry: controller.NewPermanentError(err)}
	}
	gvk, _ := ref.GroupVersionKind()
	mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		err = fmt.Errorf("subject %s: kind %s is not served by the API server", ref, gvk)
		return ref, schema.GroupVersionResource{}, &unavailableError{reason: ReasonSubjectKindNotFound, err: err, retry: controller.NewRequeueAfter(kindNotFoundRetry)}
	}
	if err != nil {
		return ref, schema.GroupVersionResource{}, fmt.Errorf("subject %s: map kind to resource: %w", ref, err)
	}
	observer, err := r.observer(b)
	if err != nil {
		return ref, schema.GroupVersionResource{}, err
	}
	if err := r.Tracker.TrackReference(ref, observer); err != nil {
		return ref, schema.GroupVersionResource{}, fmt.Errorf("subject %s: track: %w", ref, err)
	}
	return ref, mapping.Resource, nil
}

// observer identifies b to the tracker by its kind and name.
func (r *BaseReconciler) observer(b Bindable) (tracker.Observer, error) {
	gvk, err := r.Mapper.KindFor(r.GVR)
	if err != nil {
		return tracker.Observer{}, fmt.Errorf("binding resource %s: %w", r.GVR, err)
	}
	return tracker.Observer{GroupKind: gvk.GroupKind(), NamespacedName: types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}}, nil
}

// subjectSet is what one reconcile acts on: the subjects a Binding selects,
// and the others of the kind in the namespace, from which a relabelled
// subject must be unbound.
type subjectSet struct {
	selected, others []*duck.WithPod
}

// listSubjects reads the subjects from the informer cache, sorted by name. A
// named subject that does not exist yet is no error: admission binds it
// when it is created.
func (r *BaseReconciler) listSubjects(ctx context.Context, ref tracker.Reference, gvr schema.GroupVersionResource) (subjectSet, error) {
	_, lister, err := r.Factory.Get(ctx, gvr)
	if err != nil {
		return subjectSet{}, fmt.Errorf("subject %s: informer: %w", ref, err)
	}
	if ref.Name != "" {
		obj, err := lister.ByNamespace(ref.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return subjectSet{}, nil
		}
		if err != nil {
			return subjectSet{}, fmt.Errorf("subject %s: get: %w", ref, err)
		}
		wp, err := asWithPod(obj)
		return subjectSet{selected: []*duck.WithPod{wp}}, err
	}
	sel, err := ref.LabelSelector()
	if err != nil {
		return subjectSet{}, fmt.Errorf("subject %s: %w", ref, err)
	}
	all, err := lister.ByNamespace(ref.Namespace).List(labels.Everything())
	if err != nil {
		return subjectSet{}, fmt.Errorf("subject %s: list: %w", ref, err)
	}
	var set subjectSet
	for _, obj := range all {
		wp, err := asWithPod(obj)
		if err != nil {
			return subjectSet{}, err
		}
		if sel.Matches(labels.Set(wp.Labels)) {
			set.selected = append(set.selected, wp)
		} else {
			set.others = append(set.others, wp)
		}
	}
	byName := func(a, b *duck.WithPod) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(set.selected, byName)
	slices.SortFunc(set.others, byName)
	return set, nil
}

func asWithPod(obj any) (*duck.WithPod, error) {
	wp, ok := obj.(*duck.WithPod)
	if !ok {
		return nil, fmt.Errorf("informer holds %T, not *duck.WithPod: use a duck.TypedInformerFactory", obj)
	}
	return wp, nil
}

// admissionOnly reports whether ref's kind cannot change its pod template in
// place.
func (r *BaseReconciler) admissionOnly(ref tracker.Reference) bool {
	gvk, err := ref.GroupVersionKind()
	if err != nil {
		return false
	}
	kinds := r.AdmissionOnly
	if kinds == nil {
		kinds = []schema.GroupKind{{Group: "", Kind: "Pod"}, {Group: "batch", Kind: "Job"}}
	}
	return slices.Contains(kinds, gvk.GroupKind())
}

// patchSubjects applies mutation to each subject and patches those that
// change, at most PatchConcurrency at a time. The subjects need not be
// copies: each patch works on its own copy.
func (r *BaseReconciler) patchSubjects(ctx context.Context, b Bindable, gvr schema.GroupVersionResource, subjects []*duck.WithPod, mutation Mutation) error {
	limit := cmp.Or(r.PatchConcurrency, DefaultPatchConcurrency)
	sem := make(chan struct{}, limit)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, s := range subjects {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.patchSubject(ctx, b, gvr, s, mutation); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// patchSubject patches one subject with a JSON patch guarded by a test of
// its resourceVersion, so a change made meanwhile (by a user, the webhook or
// another Binding) is never overwritten: the subject is read again and the
// mutation redone. A subject that is gone is no error.
func (r *BaseReconciler) patchSubject(ctx context.Context, b Bindable, gvr schema.GroupVersionResource, subject *duck.WithPod, mutation Mutation) error {
	gk := schema.GroupKind{Group: gvr.Group, Kind: subject.Kind}
	shape := r.Shapes.For(gk)
	client := r.DynamicClient.Resource(gvr).Namespace(subject.Namespace)
	describe := func() string {
		return fmt.Sprintf("binding %s/%s: subject %s %s/%s", b.GetNamespace(), b.GetName(), gvr.GroupResource(), subject.Namespace, subject.Name)
	}
	mctx := ctx
	if r.WithContext != nil {
		var err error
		if mctx, err = r.WithContext(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", describe(), err)
		}
	}
	for attempt := 1; ; attempt++ {
		after := subject.DeepCopy()
		mutation(mctx, after)
		ops, err := shape.CreatePatch(subject, after)
		if err != nil {
			return fmt.Errorf("%s: create patch: %w", describe(), err)
		}
		if len(ops) == 0 {
			return nil
		}
		test := jsonpatch.Operation{Operation: "test", Path: "/metadata/resourceVersion", Value: subject.ResourceVersion}
		patch, err := json.Marshal(append([]jsonpatch.Operation{test}, ops...))
		if err != nil {
			return fmt.Errorf("%s: encode patch: %w", describe(), err)
		}
		_, err = client.Patch(ctx, subject.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) && !apierrors.IsInvalid(err):
			return fmt.Errorf("%s: patch: %w", describe(), err)
		case attempt == maxPatchAttempts:
			return fmt.Errorf("%s: patch: still conflicting after %d attempts: %w", describe(), attempt, err)
		}
		// A failed resourceVersion test comes back as 422 Invalid. Read the
		// subject again: if it did not change, the patch itself is invalid.
		fresh, getErr := client.Get(ctx, subject.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return nil
		}
		if getErr != nil {
			return fmt.Errorf("%s: read after conflict: %w", describe(), getErr)
		}
		if fresh.GetResourceVersion() == subject.ResourceVersion {
			return fmt.Errorf("%s: patch: %w", describe(), err)
		}
		if subject, err = shape.FromUnstructured(fresh); err != nil {
			return fmt.Errorf("%s: %w", describe(), err)
		}
	}
}

// labelNamespace opts namespace in, for InclusionMode.
func (r *BaseReconciler) labelNamespace(ctx context.Context, namespace string) error {
	if r.NamespaceLister == nil || r.KubeClient == nil {
		return errors.New("inclusion mode needs NamespaceLister and KubeClient")
	}
	ns, err := r.NamespaceLister.Get(namespace)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	}
	if ns.Labels[IncludeLabel] == "true" {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, IncludeLabel)
	if _, err := r.KubeClient.CoreV1().Namespaces().Patch(ctx, namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("namespace %s: label for inclusion: %w", namespace, err)
	}
	return nil
}
