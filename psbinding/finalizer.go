package psbinding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// SubjectKindsAnnotation on a Binding records the kinds of subjects the
// reconciler may have bound for it, as a sorted, comma-separated list of
// apiVersion/Kind ("apps/v1/Deployment", "batch/v1/CronJob"). It is written
// with the finalizer, before the first subject of a kind is bound, and a
// kind leaves it once no subject of that kind records the Binding any more.
// It is how a Binding whose reference moved to another kind, or that was
// deleted while the controller was down, still finds everything it bound.
const SubjectKindsAnnotation = "bindings.bindkit.dev/subject-kinds"

// finalizer is the name under which the reconciler holds a Binding until
// its subjects are unbound: the Bindings' group and resource, e.g.
// "bindkit.dev/githubbindings", domain-qualified as the API server asks.
func (r *BaseReconciler) finalizer() string { return r.GVR.Group + "/" + r.GVR.Resource }

func (r *BaseReconciler) hasFinalizer(b Bindable) bool {
	return slices.Contains(b.GetFinalizers(), r.finalizer())
}

// recordedKinds reads b's SubjectKindsAnnotation. Entries it cannot read
// are skipped: a kind that is not recorded costs, at worst, subjects left
// bound, never a wrong write.
func recordedKinds(b Bindable) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for entry := range strings.SplitSeq(b.GetAnnotations()[SubjectKindsAnnotation], ",") {
		i := strings.LastIndex(entry, "/")
		if i < 0 {
			continue
		}
		gv, err := schema.ParseGroupVersion(strings.TrimSpace(entry[:i]))
		kind := strings.TrimSpace(entry[i+1:])
		if err != nil || kind == "" || gv.Version == "" {
			continue
		}
		if gvk := gv.WithKind(kind); !slices.ContainsFunc(out, sameKind(gvk)) {
			out = append(out, gvk)
		}
	}
	return out
}

// sameKind matches a kind whatever its version.
func sameKind(gvk schema.GroupVersionKind) func(schema.GroupVersionKind) bool {
	return func(other schema.GroupVersionKind) bool { return other.GroupKind() == gvk.GroupKind() }
}

func formatKinds(kinds []schema.GroupVersionKind) string {
	entries := make([]string, len(kinds))
	for i, gvk := range kinds {
		entries[i] = gvk.GroupVersion().String() + "/" + gvk.Kind
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// recordKinds makes sure b carries the finalizer and records the kind of
// current (nil when the reference does not resolve), in one write when
// either is missing, and returns the kinds b records.
func (r *BaseReconciler) recordKinds(ctx context.Context, b Bindable, current *subject) ([]schema.GroupVersionKind, error) {
	kinds := recordedKinds(b)
	wantKinds := kinds
	if current != nil && !r.admissionOnly(current.gvk.GroupKind()) && !slices.ContainsFunc(kinds, sameKind(current.gvk)) {
		wantKinds = append(slices.Clone(kinds), current.gvk)
	}
	var ops []jsonpatch.Operation
	if !r.hasFinalizer(b) {
		ops = append(ops, addFinalizerOp(b, r.finalizer()))
	}
	if len(wantKinds) != len(kinds) {
		ops = append(ops, setAnnotationOps(b, SubjectKindsAnnotation, formatKinds(wantKinds))...)
	}
	if len(ops) == 0 {
		return kinds, nil
	}
	if err := r.patchBinding(ctx, b, ops); err != nil {
		r.warn(ctx, b, reasonFinalizerUpdateFailed, err)
		return nil, err
	}
	return wantKinds, nil
}

// forgetKinds removes done from b's SubjectKindsAnnotation.
func (r *BaseReconciler) forgetKinds(ctx context.Context, b Bindable, done []schema.GroupVersionKind) error {
	kinds := slices.DeleteFunc(recordedKinds(b), func(gvk schema.GroupVersionKind) bool { return slices.ContainsFunc(done, sameKind(gvk)) })
	return r.patchBinding(ctx, b, setAnnotationOps(b, SubjectKindsAnnotation, formatKinds(kinds)))
}

// removeFinalizer lets a deleted Binding go. A Binding already gone, or
// whose finalizer someone else removed, is no error.
func (r *BaseReconciler) removeFinalizer(ctx context.Context, b Bindable) error {
	i := slices.Index(b.GetFinalizers(), r.finalizer())
	if i < 0 {
		return nil
	}
	err := r.patchBinding(ctx, b, []jsonpatch.Operation{{Operation: "remove", Path: fmt.Sprintf("/metadata/finalizers/%d", i)}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if isConflict(err) {
		fresh, getErr := r.DynamicClient.Resource(r.GVR).Namespace(b.GetNamespace()).Get(ctx, b.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) || (getErr == nil && !slices.Contains(fresh.GetFinalizers(), r.finalizer())) {
			return nil
		}
	}
	return err
}

func addFinalizerOp(b Bindable, finalizer string) jsonpatch.Operation {
	if len(b.GetFinalizers()) == 0 {
		return jsonpatch.Operation{Operation: "add", Path: "/metadata/finalizers", Value: []string{finalizer}}
	}
	return jsonpatch.Operation{Operation: "add", Path: fmt.Sprintf("/metadata/finalizers/%d", len(b.GetFinalizers())), Value: finalizer}
}

// setAnnotationOps sets (or, for an empty value, removes) one annotation.
func setAnnotationOps(b Bindable, key, value string) []jsonpatch.Operation {
	path := duck.AnnotationPath(key)
	old, present := b.GetAnnotations()[key]
	switch {
	case value == "" && !present:
		return nil
	case value == "":
		return []jsonpatch.Operation{{Operation: "remove", Path: path}}
	case present && old == value:
		return nil
	case len(b.GetAnnotations()) == 0:
		return []jsonpatch.Operation{{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{key: value}}}
	default:
		return []jsonpatch.Operation{{Operation: "add", Path: path, Value: value}}
	}
}

// patchBinding sends ops to b, guarded by duck.Guard against the copy of b
// they were computed from, and copies the result's metadata into b for the
// writes that follow. A guard that fails, because the cache was behind or
// someone changed the same fields, is a conflict: the reconcile is requeued
// quietly.
func (r *BaseReconciler) patchBinding(ctx context.Context, b Bindable, ops []jsonpatch.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return fmt.Errorf("%s: convert: %w", describe(b), err)
	}
	guarded, err := duck.Guard(content, ops)
	if err != nil {
		return fmt.Errorf("%s: %w", describe(b), err)
	}
	body, err := duck.MarshalPatch(guarded)
	if err != nil {
		return fmt.Errorf("%s: %w", describe(b), err)
	}
	got, err := r.DynamicClient.Resource(r.GVR).Namespace(b.GetNamespace()).Patch(ctx, b.GetName(), types.JSONPatchType, body, metav1.PatchOptions{FieldManager: r.fieldManager(ctx)})
	switch {
	case err == nil:
		copyMeta(got, b)
		return nil
	case apierrors.IsNotFound(err):
		return err
	case apierrors.IsConflict(err), apierrors.IsInvalid(err):
		return &conflictError{what: describe(b) + ": metadata", err: err}
	default:
		return fmt.Errorf("%s: patch metadata: %w", describe(b), err)
	}
}

func copyMeta(from *unstructured.Unstructured, to Bindable) {
	to.SetFinalizers(from.GetFinalizers())
	to.SetAnnotations(from.GetAnnotations())
	to.SetResourceVersion(from.GetResourceVersion())
}

// conflictError is a write that lost a race with another writer (or with
// the informer cache): a retry from a fresh read resolves it, so it is
// requeued without a Warning event.
type conflictError struct {
	what string
	err  error
}

func (e *conflictError) Error() string {
	return e.what + ": conflict: changed by another writer since it was read; retrying from a fresh read"
}
func (e *conflictError) Unwrap() error { return controller.NewRequeueAfter(conflictRetry) }

// isConflict reports whether err is, or wraps, a conflictError.
func isConflict(err error) bool {
	_, ok := errors.AsType[*conflictError](err)
	return ok
}
