package v1alpha1

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	// knative: duckv1 "knative.dev/pkg/apis/duck/v1". The alias keeps the
	// walkthrough's Do and Undo unchanged.
	duckv1 "github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/github"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

var _ psbinding.Bindable = (*GithubBinding)(nil)

// GetSubject implements psbinding.Bindable. A subject without a namespace
// is in the Binding's own.
func (fb *GithubBinding) GetSubject() tracker.Reference {
	ref := fb.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = fb.Namespace
	}
	return ref
}

// GetBindingStatus implements psbinding.Bindable.
func (fb *GithubBinding) GetBindingStatus() duckv1.BindableStatus { return &fb.Status.Status }

// Undo removes the Secret's volume and every mount of it.
func (fb *GithubBinding) Undo(ctx context.Context, ps *duckv1.WithPod) {
	spec := ps.Spec.Template.Spec

	ps.Spec.Template.Spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == github.VolumeName
	})
	isGithubMount := func(vm corev1.VolumeMount) bool { return vm.Name == github.VolumeName }
	for i, c := range spec.InitContainers {
		spec.InitContainers[i].VolumeMounts = slices.DeleteFunc(c.VolumeMounts, isGithubMount)
	}
	for i, c := range spec.Containers {
		spec.Containers[i].VolumeMounts = slices.DeleteFunc(c.VolumeMounts, isGithubMount)
	}
}

// Do mounts the Secret, read-only, at github.MountPath in every container
// and init container. It undoes first, so it can append unconditionally.
func (fb *GithubBinding) Do(ctx context.Context, ps *duckv1.WithPod) {
	fb.Undo(ctx, ps)

	ps.Spec.Template.Spec.Volumes = append(ps.Spec.Template.Spec.Volumes, corev1.Volume{
		Name: github.VolumeName,
		VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: fb.Spec.Secret.Name},
		},
	})
	volumeMount := corev1.VolumeMount{
		Name:      github.VolumeName,
		ReadOnly:  true,
		MountPath: github.MountPath,
	}
	spec := ps.Spec.Template.Spec
	for i := range spec.InitContainers {
		spec.InitContainers[i].VolumeMounts = append(spec.InitContainers[i].VolumeMounts, volumeMount)
	}
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, volumeMount)
	}
}
