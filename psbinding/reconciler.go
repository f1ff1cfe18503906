package psbinding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// SubResourcesReconcilerInterface is implemented by a Binding author who
// owns objects beside the subjects (a ConfigMap the Binding creates, say)
// that Do may make the subjects refer to. The order is that of a stack:
// Reconcile runs before any subject is bound, and a failure keeps the
// subjects from being bound (the Binding is not Ready, reason
// SubResourcesFailed), so a subject never refers to something that does not
// exist yet; ReconcileDeletion runs after every subject is unbound, so a
// subject never refers to something already deleted.
type SubResourcesReconcilerInterface interface {
	Reconcile(ctx context.Context, b Bindable) error
	ReconcileDeletion(ctx context.Context, b Bindable) error
}

// Reasons of the Ready condition the BaseReconciler sets.
const (
	// ReasonSubjectInvalid: the subject reference does not validate.
	ReasonSubjectInvalid = "SubjectInvalid"
	// ReasonSubjectOutsideNamespace: the subject reference names another
	// namespace than the Binding's (see NamespaceError).
	ReasonSubjectOutsideNamespace = "SubjectOutsideNamespace"
	// ReasonSubjectKindNotFound: the API server does not serve the
	// subject's kind (yet); the Binding looks again every 30 seconds.
	ReasonSubjectKindNotFound = "SubjectKindNotFound"
	// ReasonSubjectsUnavailable: the subjects could not be listed.
	ReasonSubjectsUnavailable = "SubjectsUnavailable"
	// ReasonSubjectPatchFailed: a subject could not be patched.
	ReasonSubjectPatchFailed = "SubjectPatchFailed"
	// ReasonSubjectHasNoPodTemplate: a subject has no pod template where
	// its kind's shape says it is; it is never patched.
	ReasonSubjectHasNoPodTemplate = "SubjectHasNoPodTemplate"
	// ReasonSubjectUnreadable: a subject's object does not convert to the
	// pod template its shape describes.
	ReasonSubjectUnreadable = "SubjectUnreadable"
	// ReasonSubResourcesFailed: the SubResourcesReconciler failed, so no
	// subject was bound.
	ReasonSubResourcesFailed = "SubResourcesFailed"
	// ReasonContextFailed: WithContext failed, so no subject was bound.
	ReasonContextFailed = "ContextFailed"
	// ReasonBoundAtAdmissionOnly: the subject's kind cannot change its pod
	// template in place; it is bound when created.
	ReasonBoundAtAdmissionOnly = "BoundAtAdmissionOnly"
	// ReasonNamespaceExcluded: the Binding's namespace is labelled
	// ExcludeLabel=true, so nothing in it is bound.
	ReasonNamespaceExcluded = "NamespaceExcluded"
	// ReasonNamespaceNotIncluded: in InclusionMode, the Binding's namespace
	// is not labelled IncludeLabel=true, so nothing in it is bound.
	ReasonNamespaceNotIncluded = "NamespaceNotIncluded"

	reasonFinalizerUpdateFailed = "FinalizerUpdateFailed"
	reasonStatusUpdateFailed    = "StatusUpdateFailed"
	reasonUnbindFailed          = "UnbindFailed"
)

// DefaultPatchConcurrency bounds how many subject patches a reconciler has
// in flight at once, across its concurrent reconciles, when
// BaseReconciler.PatchConcurrency is zero.
const DefaultPatchConcurrency = 8

// DefaultFieldManager is the field manager of the reconciler's writes when
// BaseReconciler.FieldManager is empty.
const DefaultFieldManager = "bindkit"

// DefaultTrackerLease is how long a Binding's interest in its subjects
// lasts without a reconcile renewing it. Every reconcile renews it, and
// sharedmain's informers resync every few hours, but a process wired
// without resync reconciles a Binding nobody touches only once: the lease
// must outlive any quiet spell, or later subject changes would go
// unnoticed. A stale registration (a subject the Binding no longer names)
// costs one no-op reconcile per change of that subject, with no request.
const DefaultTrackerLease = 10 * 365 * 24 * time.Hour

// kindNotFoundRetry is how long a Binding whose subject kind is unknown
// waits before it looks again: the kind's CRD may be installed later.
const kindNotFoundRetry = 30 * time.Second

// conflictRetry is how long a reconcile whose write of the Binding itself
// conflicted waits before it runs again: long enough for the informer to
// deliver the change that caused the conflict.
const conflictRetry = 250 * time.Millisecond

// BaseReconciler makes one kind of Binding take effect on the subjects that
// already exist. Its fields follow knative's psbinding.BaseReconciler, with
// Mapper added because resource names come from discovery, never from
// guessed plurals.
//
// A reconcile of a Binding, in order:
//
//  1. adds the finalizer (and, in the same write, records the subject kinds
//     the Binding binds, see SubjectKindsAnnotation);
//  2. calls WithContext once; Do and Undo of every subject run in the
//     context it returns;
//  3. stops, with the Ready condition saying why, when the subject
//     reference is invalid or names another namespace, when the kind is not
//     served, or when the Binding's namespace is excluded (or, in
//     InclusionMode, not included);
//  4. runs the SubResourcesReconciler;
//  5. binds every selected subject whose duck.BoundAnnotation does not
//     record this Binding at its current generation, and unbinds every
//     subject that records this Binding but is no longer selected (or is of
//     a kind the Binding no longer names). A subject labelled ExcludeLabel
//     is never patched, whatever it records.
//
// Subjects are read from the process's slim metadata cache (Factory); a
// subject's full object is read only when it needs a patch, so a reconcile
// of a Binding already in force sends no request at all. Each patch is a
// JSON patch guarded by duck.Guard: it tests the values it depends on, not
// the whole object's resourceVersion, so it goes through while other
// clients edit other parts of the subject, and is recomputed from a fresh
// read when someone changed what it would overwrite.
//
// On deletion every subject the Binding bound is unbound first (those of an
// excluded namespace or labelled ExcludeLabel are left as they are), then
// the SubResourcesReconciler's ReconcileDeletion runs, then the finalizer
// goes.
//
// Only the leader writes: embed promotion with LeaderAwareFuncs, as an Impl
// run under controller.RunLeaderElected does. A BaseReconciler that lacks a
// required field fails every reconcile with a permanent error naming the
// field; it never panics.
type BaseReconciler struct {
	controller.LeaderAwareFuncs
	// Settings are what the reconciler shares with the kind's
	// AdmissionReconciler: WithContext (called once per reconcile; its
	// failure is reported in the Ready condition, reason ContextFailed,
	// and no subject is patched), Shapes, SelectorMode (the admission
	// controller must use the same mode), FieldManager and
	// ExcludedNamespaces (nil: KubeNamespaces). Their fields are promoted:
	// r.WithContext = ... works as in knative.
	Settings

	// GVR is the Bindings' resource, e.g. githubbindings.bindkit.dev/v1alpha1.
	// Required.
	GVR schema.GroupVersionResource
	// Get returns the Binding namespace/name, typically straight from a
	// lister: the reconciler works on a copy, never on the cached object. An
	// error satisfying apierrors.IsNotFound means it is gone. Required.
	Get func(namespace, name string) (Bindable, error)
	// DynamicClient reads and patches subjects and writes the Bindings'
	// finalizers and status. Required.
	DynamicClient dynamic.Interface
	// MetadataClient, if set, sends the subjects' patches, so that the
	// API server answers each with the subject's metadata rather than the
	// whole object: binding ten thousand subjects then decodes ten
	// thousand small responses. Unset, DynamicClient sends them.
	MetadataClient metadata.Interface
	// Factory hands out the subjects' informers: the process's slim
	// metadata cache (duck.MetadataInformerFactory behind a
	// duck.CachedInformerFactory), reached through a
	// duck.EnqueueInformerFactory whose handler tells Tracker of every
	// subject change. It also serves namespaces, whose labels opt subjects
	// out (or in). Required.
	Factory duck.InformerFactory
	// Mapper turns a subject's kind into its resource. Required.
	Mapper meta.RESTMapper
	// Tracker records which Binding watches which subjects (and the
	// Binding's namespace). Required.
	Tracker tracker.Interface
	// Recorder, if set, receives a Warning event for each failure an
	// operator must act on. Conflicts, which a retry resolves, are not
	// reported.
	Recorder record.EventRecorder
	// NamespaceLister, if set, reads namespaces' labels; otherwise they are
	// read through Factory.
	NamespaceLister corelisters.NamespaceLister

	// SubResourcesReconciler, if set, reconciles what the Binding owns
	// besides its subjects.
	SubResourcesReconciler SubResourcesReconcilerInterface
	// AdmissionOnly lists the subject kinds whose pod template cannot be
	// changed in place, which are bound at admission only and never read
	// by the reconciler. Nil means bare Pods and Jobs.
	AdmissionOnly []schema.GroupKind
	// PatchConcurrency bounds the subject patches in flight at once, over
	// all the reconciles the controller runs concurrently (one Binding
	// with many subjects may use all of it; many Bindings share it); 0
	// means DefaultPatchConcurrency. It is read at the first patch.
	PatchConcurrency int
	// Observer, if set, is told of subject patches, conflicts and the
	// subjects bound, for metrics. Nil means the controller.Observer of
	// the reconcile's context when it is also an Observer (as
	// injection/sharedmain's metrics are), else none.
	Observer Observer
	// Companions, if set, returns the Bindings of the kind that admission
	// applies to an object (the process's AdmissionReconciler.Companions):
	// a reconcile that binds a subject for a Binding no rollout paces
	// applies in the same patch every other one of them the subject does
	// not record and no rollout paces (see companionApps). Unset, each
	// Binding's reconcile patches for its own change only.
	Companions func(group, kind, namespace, name string, labels map[string]string) []Bindable

	// generations remembers when each Binding's generation was first seen,
	// for RolloutPolicy.Quiet.
	generations generations

	checkOnce sync.Once
	checkErr  error

	// patchSlots holds a slot per subject patch in flight (PatchConcurrency).
	slotsOnce  sync.Once
	patchSlots chan struct{}
	// subjectLocks serialize the patches of one subject.
	subjectLocks subjectLocks
}

// check reports the required fields that are missing, once.
func (r *BaseReconciler) check() error {
	r.checkOnce.Do(func() {
		var missing []string
		for name, ok := range map[string]bool{
			"GVR": !r.GVR.Empty(), "Get": r.Get != nil, "DynamicClient": r.DynamicClient != nil,
			"Factory": r.Factory != nil, "Mapper": r.Mapper != nil, "Tracker": r.Tracker != nil,
		} {
			if !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			r.checkErr = fmt.Errorf("psbinding: BaseReconciler for %s: missing %s", cmp.Or(r.GVR.GroupResource().String(), "an unnamed resource"), strings.Join(missing, ", "))
		}
	})
	return r.checkErr
}

// Reconcile implements controller.Reconciler for the Binding at key.
func (r *BaseReconciler) Reconcile(ctx context.Context, key string) error {
	if err := r.check(); err != nil {
		return controller.NewPermanentError(err)
	}
	if !r.IsLeader() {
		return nil // followers keep warm caches but never write
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.NewPermanentError(fmt.Errorf("invalid key %q: %w", key, err))
	}
	b, err := r.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		// Deleted after it was queued: its finalizer saw to its subjects.
		r.observerIn(ctx).SubjectsBound(r.GVR.GroupResource(), types.NamespacedName{Namespace: namespace, Name: name}, 0)
		controlObserverOf(r.observerIn(ctx)).RolloutState(r.GVR.GroupResource(), types.NamespacedName{Namespace: namespace, Name: name}, "")
		return nil
	}
	if err != nil {
		return fmt.Errorf("binding %s: get: %w", key, err)
	}
	// Finalizer and status writes change b: keep them out of the cache.
	b = b.DeepCopyObject().(Bindable)
	if b.GetDeletionTimestamp() != nil {
		orig := b.DeepCopyObject().(Bindable)
		err := r.reconcileDeletion(ctx, b)
		logPanic(ctx, err)
		if ro, ok := errors.AsType[*rollingOut](err); ok && ctx.Err() == nil {
			// Unbinding in waves (RolloutPolicy.PaceDeletion): reported
			// like any rollout.
			b.GetBindingStatus().MarkBindingUnavailable(ro.reason, ro.message)
			if err := r.updateStatus(ctx, orig, b); err != nil {
				return err
			}
			return controller.NewRequeueAfter(cmp.Or(ro.retry, rolloutRecheck))
		}
		return err
	}

	orig := b.DeepCopyObject().(Bindable)
	status := b.GetBindingStatus()
	// The generation first: conditions record the generation they describe.
	status.SetObservedGeneration(b.GetGeneration())
	status.InitializeConditions()
	reconcileErr := r.checkValid(ctx, b)
	if reconcileErr == nil {
		reconcileErr = r.publishStatus(b)
	}
	if reconcileErr == nil {
		reconcileErr = r.reconcileBinding(ctx, b)
	}
	logPanic(ctx, reconcileErr)
	if ctx.Err() != nil {
		// Demoted, or shutting down: another replica (or this one, later)
		// reconciles again; a status written now would be a write after
		// demotion, and would report the interruption as a failure.
		return context.Cause(ctx)
	}
	if err := r.updateStatus(ctx, orig, b); err != nil {
		return errors.Join(reconcileErr, err)
	}
	r.reportApplied(ctx, orig, b)
	return reconcileErr
}

// checkValid marks b not Ready, binding nothing, when Settings.Validate
// refuses it (a panic included); the error waits for b to change.
func (r *BaseReconciler) checkValid(ctx context.Context, b Bindable) error {
	err := r.validate(b)
	if err == nil {
		return nil
	}
	reason := ReasonBindingInvalid
	if _, ok := errors.AsType[*PanicError](err); ok {
		reason = ReasonBindingPanicked
	} else {
		err = fmt.Errorf("%s: invalid, nothing of it is applied: %w", describe(b), err)
	}
	b.GetBindingStatus().MarkBindingUnavailable(reason, err.Error())
	r.warn(ctx, b, reason, err)
	return controller.NewPermanentError(err)
}

// publishStatus lets a StatusPublisher publish; a panic marks the Binding
// not Ready, as one in Do does, and is not retried.
func (r *BaseReconciler) publishStatus(b Bindable) error {
	p, ok := b.(StatusPublisher)
	if !ok {
		return nil
	}
	err := contain(b, "PublishStatus", "", p.PublishStatus)
	if err != nil {
		b.GetBindingStatus().MarkBindingUnavailable(ReasonBindingPanicked, err.Error())
		return controller.NewPermanentError(err)
	}
	return nil
}

// warn records a Warning event on the Binding, unless err is a conflict
// that a retry resolves, or the reconcile was cut short by demotion or
// shutdown (an event is a write too).
func (r *BaseReconciler) warn(ctx context.Context, b Bindable, reason string, err error) {
	if r.Recorder == nil || isConflict(err) || ctx.Err() != nil {
		return
	}
	r.Recorder.Event(b, corev1.EventTypeWarning, reason, err.Error())
}

// boundBy is how b appears in its subjects' duck.BoundAnnotation.
func (r *BaseReconciler) boundBy(b Bindable) duck.BoundBy {
	return duck.BoundBy{Resource: r.GVR.GroupResource(), Name: b.GetName(), UID: b.GetUID()}
}

// describe names b for errors: "binding default/gh".
func describe(b Bindable) string {
	return "binding " + b.GetNamespace() + "/" + b.GetName()
}

// logPanic logs the stack of the first panic of a Binding's code that err
// holds: once per reconcile, that is once per step of the work queue's
// backoff, however many subjects panicked.
func logPanic(ctx context.Context, err error) {
	p, ok := errors.AsType[*PanicError](err)
	if !ok {
		return
	}
	logging.FromContext(ctx).Error("binding panicked; its other subjects are bound, and it is retried with backoff",
		zap.String("binding", p.Binding), zap.String("call", p.Call), zap.String("subject", p.Subject),
		zap.Any("panic", p.Value), zap.ByteString("stack", p.Stack))
}
