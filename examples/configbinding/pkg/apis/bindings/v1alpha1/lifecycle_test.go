package v1alpha1

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

func fromConfigMap(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func newBinding() *ConfigBinding {
	return &ConfigBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"},
		Spec: ConfigBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Data:    map[string]string{"LOG_LEVEL": "debug"},
		},
	}
}

func withPod(spec corev1.PodSpec) *duck.WithPod {
	wp := &duck.WithPod{}
	wp.Spec.Template.Spec = spec
	return wp
}

var (
	unrelatedSecret = corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}
	prefixed        = corev1.EnvFromSource{Prefix: "OTHER_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}
)

func TestDo(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		in   corev1.PodSpec
		want corev1.PodSpec
	}{{
		name: "containers and init containers",
		ctx:  WithConfigMapName(context.Background(), "cm"),
		in:   corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "app"}, {Name: "sidecar"}}},
		want: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{fromConfigMap("cm")}}},
			Containers: []corev1.Container{
				{Name: "app", EnvFrom: []corev1.EnvFromSource{fromConfigMap("cm")}},
				{Name: "sidecar", EnvFrom: []corev1.EnvFromSource{fromConfigMap("cm")}},
			},
		},
	}, {
		name: "after the workload's own sources, which stay",
		ctx:  WithConfigMapName(context.Background(), "cm"),
		in:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{unrelatedSecret, prefixed}}}},
		want: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{unrelatedSecret, prefixed, fromConfigMap("cm")}}}},
	}, {
		name: "no ConfigMap name in the context: nothing to do",
		ctx:  context.Background(),
		in:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		want: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding()
			once := withPod(tc.in)
			b.Do(tc.ctx, once)
			if diff := cmp.Diff(tc.want, once.Spec.Template.Spec); diff != "" {
				t.Errorf("Do (-want +got):\n%s", diff)
			}
			twice := once.DeepCopy()
			b.Do(tc.ctx, twice)
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("Do twice differs from Do once (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestUndoAfterDoRestores(t *testing.T) {
	ctx := WithConfigMapName(context.Background(), "cm")
	tests := []struct {
		name string
		in   corev1.PodSpec
	}{
		{"bare", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}},
		{"init containers and unrelated sources", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{prefixed}}},
			Containers:     []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{unrelatedSecret}}, {Name: "sidecar"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding()
			wp := withPod(*tc.in.DeepCopy())
			b.Do(ctx, wp)
			if cmp.Equal(tc.in, wp.Spec.Template.Spec) {
				t.Fatal("Do changed nothing; the test proves nothing")
			}
			b.Undo(ctx, wp)
			if diff := cmp.Diff(tc.in, wp.Spec.Template.Spec); diff != "" {
				t.Errorf("Undo after Do (-original +got):\n%s", diff)
			}
		})
	}
}

func TestGetSubjectDefaultsNamespace(t *testing.T) {
	b := newBinding()
	if got := b.GetSubject().Namespace; got != "shop" {
		t.Errorf("subject namespace = %q, want the binding's", got)
	}
	if b.Spec.Subject.Namespace != "" {
		t.Error("GetSubject changed the spec")
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	b := newBinding()
	c := b.DeepCopyObject().(*ConfigBinding)
	c.Spec.Data["LOG_LEVEL"] = "changed"
	if b.Spec.Data["LOG_LEVEL"] != "debug" {
		t.Error("copy shares spec.data")
	}
}
