package declarative_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
)

// rich adds one of everything a Spec can add.
var rich = declarative.Spec{
	Env: []corev1.EnvVar{
		{Name: "BINDING_URL", Value: "https://example.com"},
		{Name: "BINDING_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
	},
	EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
	VolumeMounts: []corev1.VolumeMount{{Name: "binding-certs", MountPath: "/var/run/binding", ReadOnly: true}},
	Volumes: []corev1.Volume{{Name: "binding-certs", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "certs"}}}},
	InitContainers:    []corev1.Container{{Name: "binding-init", Image: "busybox", Command: []string{"true"}}},
	Containers:        []corev1.Container{{Name: "binding-proxy", Image: "envoy"}},
	InitContainersToo: true,
}

// declared is the example's GithubBinding with Do and Undo derived from a
// Spec instead of its own.
type declared struct {
	*v1alpha1.GithubBinding
	spec declarative.Spec
}

func (d *declared) Do(_ context.Context, wp *duck.WithPod)   { d.spec.Do(wp) }
func (d *declared) Undo(_ context.Context, wp *duck.WithPod) { d.spec.Undo(wp) }

func githubBinding() *v1alpha1.GithubBinding {
	b := &v1alpha1.GithubBinding{}
	b.Namespace, b.Name = "default", "gh"
	b.Spec.Secret.Name = "github-token"
	return b
}

// TestDerivedDoUndoKeepContract runs the contract kit over every subject
// shape: the derived Undo restores what the derived Do changed.
func TestDerivedDoUndoKeepContract(t *testing.T) {
	for name, spec := range map[string]declarative.Spec{
		"rich":             rich,
		"env only":         {Env: rich.Env},
		"sidecar only":     {Containers: rich.Containers},
		"mount, no inits":  {Volumes: rich.Volumes, VolumeMounts: rich.VolumeMounts},
		"envFrom and init": {EnvFrom: rich.EnvFrom, InitContainers: rich.InitContainers, InitContainersToo: true},
	} {
		t.Run(name, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Fatal(err)
			}
			bindingtest.CheckContract(t, &declared{GithubBinding: githubBinding(), spec: spec}, bindingtest.ContractOptions{})
		})
	}
}

// TestSpecReproducesGithubBinding shows the example's hand-written Do is a
// Spec: on every subject shape both give the same pod template.
func TestSpecReproducesGithubBinding(t *testing.T) {
	b := githubBinding()
	spec := declarative.Spec{
		Volumes: []corev1.Volume{{Name: v1alpha1.VolumeName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: b.Spec.Secret.Name}}}},
		VolumeMounts:      []corev1.VolumeMount{{Name: v1alpha1.VolumeName, MountPath: v1alpha1.MountPath, ReadOnly: true}},
		InitContainersToo: true,
	}
	for _, s := range bindingtest.Subjects("default") {
		t.Run(s.Name, func(t *testing.T) {
			byHand, byData := withPod(t, s), withPod(t, s)
			b.Do(t.Context(), byHand)
			spec.Do(byData)
			if diff := cmp.Diff(byHand, byData); diff != "" {
				t.Errorf("Do by hand vs by Spec (-hand +spec):\n%s", diff)
			}
			b.Undo(t.Context(), byHand)
			spec.Undo(byData)
			if diff := cmp.Diff(byHand, byData); diff != "" {
				t.Errorf("Undo by hand vs by Spec (-hand +spec):\n%s", diff)
			}
		})
	}
}

func withPod(t *testing.T, s bindingtest.Subject) *duck.WithPod {
	t.Helper()
	wp, err := s.Shape.FromUnstructured(s.Object)
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	return wp
}

func TestDoReplacesByNameAndIsIdempotent(t *testing.T) {
	wp := &duck.WithPod{}
	wp.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "BINDING_URL", Value: "old"}, {Name: "KEEP", Value: "1"}}}}
	spec := declarative.Spec{Env: []corev1.EnvVar{{Name: "BINDING_URL", Value: "new"}}}
	spec.Do(wp)
	spec.Do(wp)
	want := []corev1.EnvVar{{Name: "BINDING_URL", Value: "new"}, {Name: "KEEP", Value: "1"}}
	if diff := cmp.Diff(want, wp.Spec.Template.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env after Do twice (-want +got):\n%s", diff)
	}
	spec.Undo(wp)
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "KEEP", Value: "1"}}, wp.Spec.Template.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env after Undo (-want +got):\n%s", diff)
	}
}

func TestValidateNamesFieldAndIndex(t *testing.T) {
	spec := declarative.Spec{
		Env:            []corev1.EnvVar{{Name: "A"}, {Name: ""}, {Name: "A"}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "v"}},
		Containers:     []corev1.Container{{Name: "side"}},
		InitContainers: []corev1.Container{{Name: "side"}},
	}
	err := spec.Validate()
	if err == nil {
		t.Fatal("Validate: no error")
	}
	for _, want := range []string{"Env[1]: name is required", `Env[2]: "A" is also Env[0]`, "VolumeMounts[0]: name is required", `InitContainers+Containers[1]: "side" is also InitContainers+Containers[0]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant it to contain %q", err, want)
		}
	}
}

// TestStatusDeepCopyIsIndependent checks that a copy of a status equals
// it and shares nothing with it that a write could reach.
func TestStatusDeepCopyIsIndependent(t *testing.T) {
	orig := &declarative.Status{}
	orig.SetObservedGeneration(3)
	orig.Publish(3, declarative.Spec{
		Env:        []corev1.EnvVar{{Name: "K_SINK", Value: "https://a"}},
		Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}},
		Containers: []corev1.Container{{Name: "side", Args: []string{"--x"}}},
	})
	cp := orig.DeepCopy()
	if diff := cmp.Diff(orig, cp); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	cp.Declared.Env[0].Value = "changed"
	cp.Declared.Volumes[0].Secret.SecretName = "changed"
	cp.Declared.Containers[0].Args[0] = "changed"
	if orig.Declared.Env[0].Value != "https://a" || orig.Declared.Volumes[0].Secret.SecretName != "s" || orig.Declared.Containers[0].Args[0] != "--x" {
		t.Errorf("writing the copy changed the original: %+v", orig.Declared)
	}
	if (*declarative.Status)(nil).DeepCopy() != nil || (*declarative.Spec)(nil).DeepCopy() != nil {
		t.Error("a nil copies to non-nil")
	}
}
