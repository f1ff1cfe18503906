package psbinding

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Both reconcilers of a Binding kind can undo everything the kind did, so
// that bindkit can be removed from a cluster without leaving a subject
// bound or an object held by a finalizer: they implement
// sharedmain.Uninstaller, declared once where --uninstall calls it (first
// for every admission controller, so nothing new is bound, then for every
// other reconciler, each once, with the informers synced and no
// controller running). Each Uninstall is safe to run again after a
// partial failure.

// Uninstall stops the kube-apiserver from calling the webhook: it empties
// the rules of the controller's webhook in its configuration, keeping the
// rest (an administrator deletes the configuration with the rest of the
// installation). A configuration that is gone is no error.
func (ac *AdmissionReconciler) Uninstall(ctx context.Context) error {
	client := ac.cfg.KubeClient.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cached, err := ac.configuration(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admission controller: MutatingWebhookConfiguration %s: %w", ac.cfg.ConfigurationName, err)
	}
	current := cached.DeepCopy()
	i := slices.IndexFunc(current.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == ac.cfg.WebhookName })
	if i < 0 || len(current.Webhooks[i].Rules) == 0 {
		return nil
	}
	current.Webhooks[i].Rules = nil
	if _, err := client.Update(ctx, current, metav1.UpdateOptions{FieldManager: ac.fieldManager(ctx)}); err != nil {
		return fmt.Errorf("admission controller: MutatingWebhookConfiguration %s: empty the rules: %w", ac.cfg.ConfigurationName, err)
	}
	ac.cfg.Logger.Info("uninstall: webhook no longer called")
	return nil
}

// Uninstall unbinds every subject that every Binding of the kind bound,
// excluded subjects included (an uninstall removes everything bindkit did),
// and removes the reconciler's finalizer from every Binding, so that
// deleting the Bindings, their CRD or their namespaces completes without
// the controller. Bindings are listed from the API server and read with
// Get; a Binding whose subjects cannot all be unbound keeps its finalizer
// and is reported, and the others go on.
func (r *BaseReconciler) Uninstall(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	list, err := r.DynamicClient.Resource(r.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("uninstall %s: list: %w", r.GVR.GroupResource(), err)
	}
	var errs []error
	for _, item := range list.Items {
		b, err := r.Get(item.GetNamespace(), item.GetName())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("uninstall binding %s/%s: get: %w", item.GetNamespace(), item.GetName(), err))
			continue
		}
		if err := r.release(ctx, b.DeepCopyObject().(Bindable)); err != nil {
			logPanic(ctx, err)
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
		}
	}
	return errors.Join(errs...)
}

// release unbinds everything b bound and removes the finalizer.
func (r *BaseReconciler) release(ctx context.Context, b Bindable) error {
	kinds := recordedKinds(b)
	if current, err := r.resolveSubject(b); err == nil && !slices.ContainsFunc(kinds, sameKind(current.gvk)) {
		kinds = append(kinds, current.gvk)
	}
	if len(kinds) > 0 {
		mctx, err := r.bindingContext(ctx, b)
		if err != nil {
			return err
		}
		var errs []error
		for _, gvk := range kinds {
			errs = append(errs, r.unbindAll(ctx, mctx, b, gvk, true))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return r.removeFinalizer(ctx, b)
}
