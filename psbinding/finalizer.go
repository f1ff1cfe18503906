package psbinding

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// finalizer is the name under which the reconciler holds a Binding until
// its subjects are unbound: the Bindings' group and resource, e.g.
// "bindkit.dev/githubbindings", domain-qualified as the API server asks.
func (r *BaseReconciler) finalizer() string { return r.GVR.Group + "/" + r.GVR.Resource }

func (r *BaseReconciler) hasFinalizer(b Bindable) bool {
	return slices.Contains(b.GetFinalizers(), r.finalizer())
}

// ensureFinalizer adds the finalizer on first sight, so a deleted Binding
// waits for its subjects to be unbound.
func (r *BaseReconciler) ensureFinalizer(ctx context.Context, b Bindable) error {
	if r.hasFinalizer(b) {
		return nil
	}
	return r.setFinalizers(ctx, b, append(slices.Clone(b.GetFinalizers()), r.finalizer()))
}

// removeFinalizer lets a deleted Binding go.
func (r *BaseReconciler) removeFinalizer(ctx context.Context, b Bindable) error {
	kept := slices.DeleteFunc(slices.Clone(b.GetFinalizers()), func(f string) bool { return f == r.finalizer() })
	return r.setFinalizers(ctx, b, kept)
}

// setFinalizers writes the finalizer list with a merge patch that carries
// the resourceVersion, so a concurrent change is a conflict rather than a
// lost update, and copies the result into b for the writes that follow.
func (r *BaseReconciler) setFinalizers(ctx context.Context, b Bindable, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{} // null would leave the list untouched
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      finalizers,
		"resourceVersion": b.GetResourceVersion(),
	}})
	if err != nil {
		return fmt.Errorf("binding %s/%s: encode finalizer patch: %w", b.GetNamespace(), b.GetName(), err)
	}
	got, err := r.DynamicClient.Resource(r.GVR).Namespace(b.GetNamespace()).Patch(ctx, b.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("binding %s/%s: set finalizers: %w", b.GetNamespace(), b.GetName(), err)
	}
	b.SetFinalizers(got.GetFinalizers())
	b.SetResourceVersion(got.GetResourceVersion())
	return nil
}
