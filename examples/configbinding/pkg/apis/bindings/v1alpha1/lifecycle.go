package v1alpha1

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

var _ psbinding.Bindable = (*ConfigBinding)(nil)

type configMapNameKey struct{}

// WithConfigMapName returns a copy of ctx that tells Do and Undo which
// ConfigMap holds the Binding's data.
func WithConfigMapName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, configMapNameKey{}, name)
}

// ConfigMapNameFrom returns the name WithConfigMapName stored, and whether
// there was one.
func ConfigMapNameFrom(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(configMapNameKey{}).(string)
	return name, ok && name != ""
}

// GetSubject implements duck.Bindable. A subject without a namespace is in
// the Binding's own.
func (b *ConfigBinding) GetSubject() tracker.Reference {
	ref := b.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	return ref
}

// GetBindingStatus implements duck.Bindable.
func (b *ConfigBinding) GetBindingStatus() duck.BindableStatus { return &b.Status.Status }

// Do adds an envFrom of the ConfigMap named in ctx to every container and
// init container of wp, after the ones it has, so the workload's own
// sources keep their precedence order. Without a name in ctx it does
// nothing: there is nothing to point at. Doing it twice changes nothing
// more.
func (b *ConfigBinding) Do(ctx context.Context, wp *duck.WithPod) {
	name, ok := ConfigMapNameFrom(ctx)
	if !ok {
		return
	}
	source := corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	spec := &wp.Spec.Template.Spec
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			if !slices.ContainsFunc(c.EnvFrom, refersTo(name)) {
				c.EnvFrom = append(c.EnvFrom, source)
			}
		}
	}
}

// Undo removes the envFrom of the ConfigMap named in ctx from every
// container and init container; lists it leaves empty become nil.
func (b *ConfigBinding) Undo(ctx context.Context, wp *duck.WithPod) {
	name, ok := ConfigMapNameFrom(ctx)
	if !ok {
		return
	}
	spec := &wp.Spec.Template.Spec
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			if c.EnvFrom = slices.DeleteFunc(c.EnvFrom, refersTo(name)); len(c.EnvFrom) == 0 {
				c.EnvFrom = nil
			}
		}
	}
}

func refersTo(name string) func(corev1.EnvFromSource) bool {
	return func(s corev1.EnvFromSource) bool {
		return s.ConfigMapRef != nil && s.ConfigMapRef.Name == name && s.Prefix == ""
	}
}
