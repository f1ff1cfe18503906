package psbinding

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// maxStatusAttempts bounds the status writes of one reconcile that
// conflict with another writer.
const maxStatusAttempts = 3

// updateStatus writes b's status when it differs from orig's. It writes
// against the version b was read at; when that conflicts (the informer was
// behind, or the finalizer write moved the resourceVersion), it reads the
// Binding again and, if its generation is still the one the status
// describes, writes the same status onto the fresh copy. A Binding whose
// spec changed meanwhile is requeued quietly: the status describes an older
// generation, and the next reconcile writes the right one.
func (r *BaseReconciler) updateStatus(ctx context.Context, orig, b Bindable) error {
	if equality.Semantic.DeepEqual(orig.GetBindingStatus(), b.GetBindingStatus()) {
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return fmt.Errorf("%s: convert for status update: %w", describe(b), err)
	}
	status := content["status"]
	obj := &unstructured.Unstructured{Object: content}
	client := r.DynamicClient.Resource(r.GVR).Namespace(b.GetNamespace())
	for attempt := 1; ; attempt++ {
		_, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: r.fieldManager(ctx)})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			err = fmt.Errorf("%s: update status: %w", describe(b), err)
			r.warn(ctx, b, reasonStatusUpdateFailed, err)
			return err
		case attempt == maxStatusAttempts:
			return &conflictError{what: describe(b) + ": status", err: err}
		}
		fresh, err := client.Get(ctx, b.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: read for status update: %w", describe(b), err)
		}
		if fresh.GetGeneration() != b.GetGeneration() {
			return &conflictError{what: describe(b) + ": status of an older generation", err: err}
		}
		fresh.Object["status"] = status
		obj = fresh
	}
}
