package psbinding

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// SubResourcesReconcilerInterface is implemented by a Binding author who
// owns objects beside the subjects (a ConfigMap the Binding creates, say).
// Reconcile runs after the subjects are bound; ReconcileDeletion runs first
// when the Binding is deleted, before its subjects are unbound.
type SubResourcesReconcilerInterface interface {
	Reconcile(ctx context.Context, b Bindable) error
	ReconcileDeletion(ctx context.Context, b Bindable) error
}

// Reasons of the Ready condition the BaseReconciler sets.
const (
	ReasonSubjectInvalid = "SubjectInvalid"
	// ReasonSubjectOutsideNamespace: the subject reference names another
	// namespace than the Binding's (see NamespaceError).
	ReasonSubjectOutsideNamespace = "SubjectOutsideNamespace"
	ReasonSubjectKindNotFound     = "SubjectKindNotFound"
	ReasonSubjectsUnavailable     = "SubjectsUnavailable"
	ReasonSubjectPatchFailed      = "SubjectPatchFailed"
	ReasonSubResourcesFailed      = "SubResourcesFailed"
	ReasonBoundAtAdmissionOnly    = "BoundAtAdmissionOnly"
	ReasonNamespaceLabelFailed    = "NamespaceLabelFailed"
	reasonFinalizerUpdateFailed   = "FinalizerUpdateFailed"
	reasonStatusUpdateFailed      = "StatusUpdateFailed"
	reasonUnbindFailed            = "UnbindFailed"
)

// DefaultPatchConcurrency bounds how many subjects one reconcile patches at
// once when BaseReconciler.PatchConcurrency is zero.
const DefaultPatchConcurrency = 8

// kindNotFoundRetry is how long a Binding whose subject kind is unknown
// waits before it looks again: the kind's CRD may be installed later.
const kindNotFoundRetry = 30 * time.Second

// BaseReconciler makes one kind of Binding take effect on the subjects that
// already exist: it applies Do to each subject (Undo when the Binding is
// being deleted) and patches the subject through the dynamic client. Its
// fields follow knative's psbinding.BaseReconciler, with Mapper added
// because resource names come from discovery, never from guessed plurals.
//
// Only the leader writes: embed promotion with LeaderAwareFuncs, as an Impl
// run under controller.RunLeaderElected does.
type BaseReconciler struct {
	controller.LeaderAwareFuncs

	// GVR is the Bindings' resource, e.g. githubbindings.bindkit.dev/v1alpha1.
	GVR schema.GroupVersionResource
	// Get returns the Binding namespace/name, typically straight from a
	// lister: the reconciler works on a copy, never on the cached object. An
	// error satisfying apierrors.IsNotFound means it is gone.
	Get func(namespace, name string) (Bindable, error)
	// WithContext, if set, prepares the context Do and Undo run in.
	WithContext BindableContext
	// DynamicClient patches subjects and writes the Bindings' finalizers
	// and status.
	DynamicClient dynamic.Interface
	// Factory hands out the subjects' informers; the usual stack enqueues
	// through Tracker so that a subject's change reconciles its Bindings.
	Factory duck.InformerFactory
	// Mapper turns a subject's kind into its resource.
	Mapper meta.RESTMapper
	// Tracker records which Binding watches which subjects.
	Tracker tracker.Interface
	// Recorder receives an event for each failure.
	Recorder record.EventRecorder
	// Shapes finds the pod template of each subject kind; the zero value
	// knows the built-in shapes.
	Shapes duck.Shapes

	// SelectorMode InclusionMode makes the reconciler label each subject's
	// namespace with IncludeLabel=true, through NamespaceLister and
	// KubeClient; in ExclusionMode, the default, neither is needed.
	SelectorMode    SelectorMode
	NamespaceLister corelisters.NamespaceLister
	KubeClient      kubernetes.Interface

	// SubResourcesReconciler, if set, reconciles what the Binding owns
	// besides its subjects.
	SubResourcesReconciler SubResourcesReconcilerInterface
	// AdmissionOnly lists the subject kinds whose pod template cannot be
	// changed in place, which are bound at admission only. Nil means bare
	// Pods and Jobs.
	AdmissionOnly []schema.GroupKind
	// PatchConcurrency bounds parallel subject patches; 0 means
	// DefaultPatchConcurrency.
	PatchConcurrency int
}

// Reconcile implements controller.Reconciler for the Binding at key.
func (r *BaseReconciler) Reconcile(ctx context.Context, key string) error {
	if !r.IsLeader() {
		return nil // followers keep warm caches but never write
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.NewPermanentError(fmt.Errorf("invalid key %q: %w", key, err))
	}
	b, err := r.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		return nil // deleted after it was queued: nothing left to unbind
	}
	if err != nil {
		return fmt.Errorf("binding %s: get: %w", key, err)
	}
	// Finalizer and status writes change b: keep them out of the cache.
	b = b.DeepCopyObject().(Bindable)
	if b.GetDeletionTimestamp() != nil {
		return r.reconcileDeletion(ctx, b)
	}
	if err := r.ensureFinalizer(ctx, b); err != nil {
		r.warn(b, reasonFinalizerUpdateFailed, err)
		return err
	}

	orig := b.DeepCopyObject().(Bindable)
	status := b.GetBindingStatus()
	// The generation first: conditions record the generation they describe.
	status.SetObservedGeneration(b.GetGeneration())
	status.InitializeConditions()
	reconcileErr := r.reconcileSubjects(ctx, b)
	if err := r.updateStatus(ctx, orig, b); err != nil {
		r.warn(b, reasonStatusUpdateFailed, err)
		return errors.Join(reconcileErr, err)
	}
	return reconcileErr
}

// reconcileSubjects binds every subject, runs the SubResourcesReconciler and
// records the outcome in the Ready condition. Errors that a retry cannot fix
// are permanent.
func (r *BaseReconciler) reconcileSubjects(ctx context.Context, b Bindable) error {
	status := b.GetBindingStatus()
	ref, gvr, err := r.resolveSubject(ctx, b)
	if err != nil {
		var unavailable *unavailableError
		if errors.As(err, &unavailable) {
			status.MarkBindingUnavailable(unavailable.reason, unavailable.Error())
			r.warn(b, unavailable.reason, err)
			return unavailable.retry
		}
		return err
	}
	if r.SelectorMode == InclusionMode {
		if err := r.labelNamespace(ctx, ref.Namespace); err != nil {
			status.MarkBindingUnavailable(ReasonNamespaceLabelFailed, err.Error())
			r.warn(b, ReasonNamespaceLabelFailed, err)
			return err
		}
	}
	subjects, err := r.listSubjects(ctx, ref, gvr)
	if err != nil {
		status.MarkBindingUnavailable(ReasonSubjectsUnavailable, err.Error())
		r.warn(b, ReasonSubjectsUnavailable, err)
		return err
	}
	if r.admissionOnly(ref) {
		status.MarkBindingUnavailable(ReasonBoundAtAdmissionOnly,
			fmt.Sprintf("%s cannot change its pod template in place; it is bound when created", gvr.GroupResource()))
		return r.reconcileSubResources(ctx, b)
	}
	// Subjects that left the selection (relabelled, or the selector
	// changed) are unbound; Undo leaves a subject it never bound unchanged,
	// so this costs no write for them.
	err = errors.Join(
		r.patchSubjects(ctx, b, gvr, subjects.selected, b.Do),
		r.patchSubjects(ctx, b, gvr, subjects.others, b.Undo),
	)
	if err != nil {
		status.MarkBindingUnavailable(ReasonSubjectPatchFailed, err.Error())
		r.warn(b, ReasonSubjectPatchFailed, err)
		return err
	}
	if err := r.reconcileSubResources(ctx, b); err != nil {
		return err
	}
	status.MarkBindingAvailable()
	return nil
}

func (r *BaseReconciler) reconcileSubResources(ctx context.Context, b Bindable) error {
	if r.SubResourcesReconciler == nil {
		return nil
	}
	if err := r.SubResourcesReconciler.Reconcile(ctx, b); err != nil {
		b.GetBindingStatus().MarkBindingUnavailable(ReasonSubResourcesFailed, err.Error())
		r.warn(b, ReasonSubResourcesFailed, err)
		return fmt.Errorf("binding %s/%s: sub-resources: %w", b.GetNamespace(), b.GetName(), err)
	}
	return nil
}

// reconcileDeletion unbinds every subject and then lets the Binding go. A
// subject that is gone, or that the controller may no longer patch, does
// not hold the Binding back.
func (r *BaseReconciler) reconcileDeletion(ctx context.Context, b Bindable) error {
	if !r.hasFinalizer(b) {
		return nil
	}
	if r.SubResourcesReconciler != nil {
		if err := r.SubResourcesReconciler.ReconcileDeletion(ctx, b); err != nil {
			r.warn(b, ReasonSubResourcesFailed, err)
			return fmt.Errorf("binding %s/%s: sub-resources deletion: %w", b.GetNamespace(), b.GetName(), err)
		}
	}
	ref, gvr, err := r.resolveSubject(ctx, b)
	switch {
	case err == nil && !r.admissionOnly(ref):
		subjects, err := r.listSubjects(ctx, ref, gvr)
		if err != nil {
			r.warn(b, reasonUnbindFailed, err)
			return err
		}
		if err := r.patchSubjects(ctx, b, gvr, append(subjects.selected, subjects.others...), b.Undo); err != nil {
			r.warn(b, reasonUnbindFailed, err)
			return err
		}
	case err != nil && !errors.As(err, new(*unavailableError)):
		return err
	}
	// An unresolvable subject (invalid reference, unknown kind) was never
	// bound by the reconciler, so there is nothing to undo.
	if err := r.removeFinalizer(ctx, b); err != nil {
		r.warn(b, reasonFinalizerUpdateFailed, err)
		return err
	}
	return nil
}

// updateStatus writes b's status when it differs from orig's.
func (r *BaseReconciler) updateStatus(ctx context.Context, orig, b Bindable) error {
	if equality.Semantic.DeepEqual(orig.GetBindingStatus(), b.GetBindingStatus()) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return fmt.Errorf("binding %s/%s: convert for status update: %w", b.GetNamespace(), b.GetName(), err)
	}
	obj := &unstructured.Unstructured{Object: u}
	_, err = r.DynamicClient.Resource(r.GVR).Namespace(b.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("binding %s/%s: update status: %w", b.GetNamespace(), b.GetName(), err)
	}
	return nil
}

// warn records a Warning event on the Binding.
func (r *BaseReconciler) warn(b Bindable, reason string, err error) {
	if r.Recorder != nil {
		r.Recorder.Event(b, corev1.EventTypeWarning, reason, err.Error())
	}
}
