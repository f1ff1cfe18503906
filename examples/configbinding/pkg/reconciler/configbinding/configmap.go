package configbinding

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
)

// BindingLabel is set on each ConfigMap to the name of its ConfigBinding,
// for humans and selectors; ownership itself is the owner reference.
const BindingLabel = "bindings.bindkit.dev/configbinding"

// ConfigMapName is the ConfigMap that holds the data of ConfigBinding b, in
// b's namespace: "configbinding-<name>-<uid>", with the first ten hex digits
// of b's UID. The UID makes the name the Binding's own: a ConfigMap that
// someone else created beforehand cannot have it by accident, so Do never
// points a subject at someone else's data; and a Binding deleted and
// created again under the same name gets a new ConfigMap rather than the
// old one's leftovers.
func ConfigMapName(b metav1.Object) string {
	uid := strings.ReplaceAll(string(b.GetUID()), "-", "")
	if len(uid) > 10 {
		uid = uid[:10]
	}
	name := b.GetName()
	// A DNS subdomain has at most 253 characters.
	if limit := 253 - len("configbinding--") - len(uid); len(name) > limit {
		name = strings.TrimRight(name[:limit], ".-")
	}
	if uid == "" {
		return "configbinding-" + name
	}
	return "configbinding-" + name + "-" + uid
}

// WithContext is the psbinding.BindableContext of ConfigBindings: it puts
// the Binding's ConfigMap name in the context Do and Undo run in.
func WithContext(ctx context.Context, b psbinding.Bindable) (context.Context, error) {
	return v1alpha1.WithConfigMapName(ctx, ConfigMapName(b)), nil
}

// ConfigMapReconciler implements psbinding.SubResourcesReconcilerInterface
// for ConfigBindings: one ConfigMap per Binding, controlled by it (so the
// garbage collector removes it too, should the controller be gone).
type ConfigMapReconciler struct {
	// Kube writes the ConfigMaps.
	Kube kubernetes.Interface
	// Lister reads them, so an unchanged ConfigMap costs no request.
	Lister corelisters.ConfigMapLister
}

var _ psbinding.SubResourcesReconcilerInterface = (*ConfigMapReconciler)(nil)

// Reconcile creates the Binding's ConfigMap, or updates its data and label
// when they differ. A ConfigMap of that name that the Binding does not
// control is left alone and reported: it is someone else's.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, b psbinding.Bindable) error {
	cb, err := asConfigBinding(b)
	if err != nil {
		return err
	}
	name := ConfigMapName(cb)
	current, err := r.Lister.ConfigMaps(cb.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		if _, err := r.Kube.CoreV1().ConfigMaps(cb.Namespace).Create(ctx, desiredConfigMap(cb), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ConfigMap %s/%s: create: %w", cb.Namespace, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: get: %w", cb.Namespace, name, err)
	}
	if !metav1.IsControlledBy(current, cb) {
		return fmt.Errorf("ConfigMap %s/%s exists and is not controlled by ConfigBinding %s", cb.Namespace, name, cb.Name)
	}
	want := desiredConfigMap(cb)
	if maps.Equal(current.Data, want.Data) && current.Labels[BindingLabel] == cb.Name {
		return nil
	}
	update := current.DeepCopy()
	update.Data = want.Data
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	update.Labels[BindingLabel] = cb.Name
	if _, err := r.Kube.CoreV1().ConfigMaps(cb.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("ConfigMap %s/%s: update: %w", cb.Namespace, name, err)
	}
	return nil
}

// ReconcileDeletion deletes the Binding's ConfigMap, if the Binding
// controls it; the UID precondition keeps a ConfigMap re-created by
// someone else in the meantime.
func (r *ConfigMapReconciler) ReconcileDeletion(ctx context.Context, b psbinding.Bindable) error {
	cb, err := asConfigBinding(b)
	if err != nil {
		return err
	}
	name := ConfigMapName(cb)
	current, err := r.Lister.ConfigMaps(cb.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: get: %w", cb.Namespace, name, err)
	}
	if !metav1.IsControlledBy(current, cb) {
		return nil
	}
	err = r.Kube.CoreV1().ConfigMaps(cb.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(current.UID))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("ConfigMap %s/%s: delete: %w", cb.Namespace, name, err)
	}
	return nil
}

// desiredConfigMap is the ConfigMap cb calls for.
func desiredConfigMap(cb *v1alpha1.ConfigBinding) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       cb.Namespace,
			Name:            ConfigMapName(cb),
			Labels:          map[string]string{BindingLabel: cb.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cb, v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind))},
		},
		Data: maps.Clone(cb.Spec.Data),
	}
}

func asConfigBinding(b psbinding.Bindable) (*v1alpha1.ConfigBinding, error) {
	cb, ok := b.(*v1alpha1.ConfigBinding)
	if !ok {
		return nil, fmt.Errorf("binding %s/%s is %T, not a ConfigBinding", b.GetNamespace(), b.GetName(), b)
	}
	return cb, nil
}
