package psbinding

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// envBinding is a test Binding: Do sets env var NAME=VALUE on every
// container, Undo removes it.
type envBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              envBindingSpec `json:"spec"`
	Status            duck.Status    `json:"status,omitempty"`
}

type envBindingSpec struct {
	Subject tracker.Reference `json:"subject"`
	Env     corev1.EnvVar     `json:"env"`
}

var _ Bindable = (*envBinding)(nil)

func (b *envBinding) GetSubject() tracker.Reference         { return b.Spec.Subject }
func (b *envBinding) GetBindingStatus() duck.BindableStatus { return &b.Status }

func (b *envBinding) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Status.DeepCopyInto(&out.Status)
	if b.Spec.Subject.Selector != nil {
		out.Spec.Subject.Selector = b.Spec.Subject.Selector.DeepCopy()
	}
	return &out
}

func (b *envBinding) Do(_ context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == b.Spec.Env.Name }); j >= 0 {
			c.Env[j] = b.Spec.Env
		} else {
			c.Env = append(c.Env, b.Spec.Env)
		}
	}
}

func (b *envBinding) Undo(_ context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == b.Spec.Env.Name })
	}
}

func newEnvBinding(ns, name string, subject tracker.Reference, envName, envValue string) *envBinding {
	return &envBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "test.bindkit.dev/v1", Kind: "EnvBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       envBindingSpec{Subject: subject, Env: corev1.EnvVar{Name: envName, Value: envValue}},
	}
}

func deploymentRef(ns, name string, sel *metav1.LabelSelector) tracker.Reference {
	return tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name, Selector: sel}
}
