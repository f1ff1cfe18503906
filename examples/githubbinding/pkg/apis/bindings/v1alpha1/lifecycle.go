package v1alpha1

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// Where Do puts the Secret in every container.
const (
	// VolumeName is the pod volume Do adds and Undo removes. A volume or
	// mount of this name that the workload declares itself is taken over.
	VolumeName = "github-binding"
	// MountPath is where the Secret's keys appear as files, read-only.
	MountPath = "/var/bindings/github"
)

var _ psbinding.Bindable = (*GithubBinding)(nil)

// GetSubject implements duck.Bindable. A subject without a namespace is in
// the Binding's own: a Binding can only reach workloads next to it.
func (b *GithubBinding) GetSubject() tracker.Reference {
	ref := b.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	return ref
}

// GetBindingStatus implements duck.Bindable.
func (b *GithubBinding) GetBindingStatus() duck.BindableStatus { return &b.Status.Status }

// Do mounts the Secret as volume VolumeName at MountPath, read-only, in
// every container and init container of wp. Doing it twice changes nothing
// more: an existing VolumeName volume is pointed at the Secret, keeping
// fields the API server defaulted (defaultMode), so a subject already bound
// yields an empty patch.
func (b *GithubBinding) Do(_ context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	if i := slices.IndexFunc(spec.Volumes, isBindingVolume); i >= 0 && spec.Volumes[i].Secret != nil {
		spec.Volumes[i].Secret.SecretName = b.Spec.Secret.Name
	} else {
		vol := corev1.Volume{
			Name:         VolumeName,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: b.Spec.Secret.Name}},
		}
		if i >= 0 {
			spec.Volumes[i] = vol
		} else {
			spec.Volumes = append(spec.Volumes, vol)
		}
	}
	mount := corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true}
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			if j := slices.IndexFunc(c.VolumeMounts, isBindingMount); j >= 0 {
				c.VolumeMounts[j] = mount
			} else {
				c.VolumeMounts = append(c.VolumeMounts, mount)
			}
		}
	}
}

// Undo removes what Do added: the VolumeName volume and its mounts. Lists
// it leaves empty become nil, so Undo after Do restores a workload that had
// none.
func (b *GithubBinding) Undo(_ context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	spec.Volumes = nilIfEmpty(slices.DeleteFunc(spec.Volumes, isBindingVolume))
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.VolumeMounts = nilIfEmpty(slices.DeleteFunc(c.VolumeMounts, isBindingMount))
		}
	}
}

func isBindingVolume(v corev1.Volume) bool     { return v.Name == VolumeName }
func isBindingMount(m corev1.VolumeMount) bool { return m.Name == VolumeName }

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
