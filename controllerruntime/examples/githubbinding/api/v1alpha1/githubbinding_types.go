package v1alpha1

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// GithubBinding mounts the Secret Spec.Secret names (a GitHub token) into
// every container and init container of the workloads Spec.Subject names: bindkit calls Do on
// each (existing ones from its reconciler, new ones from its webhook) and
// Undo when the GithubBinding goes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=bindings
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GithubBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GithubBindingSpec   `json:"spec"`
	Status GithubBindingStatus `json:"status,omitempty"`
}

// GithubBindingSpec is what a user asks of a GithubBinding.
//
// Give every string, list and map you add a bound, as a marker on the
// field (+kubebuilder:validation:MaxLength, MaxItems, MaxProperties, or an
// Enum): a Binding is read at every admission of its subjects, and
// bindkit's admission policies need its size bounded by its schema.
// TestGithubBindingSpecIsBounded fails naming a field without one.
type GithubBindingSpec struct {
	// Subject names the workloads to bind: one by name, or all that match a
	// label selector. An empty namespace means the Binding's own.
	Subject tracker.Reference `json:"subject"`
	// Secret names the Secret, in the Binding's namespace, that Do mounts
	// at MountPath: typically a GitHub access token under the key "token".
	Secret SecretReference `json:"secret"`
}

// SecretReference names a Secret in the Binding's namespace: the shape of
// bindkit's own GithubBinding example (spec.secret.name), so that the two
// serve the same Bindings.
type SecretReference struct {
	// Name is the Secret's name.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// GithubBindingStatus is the observed state of a GithubBinding: the Ready and
// BindingAvailable conditions bindkit manages.
type GithubBindingStatus struct {
	duck.Status `json:",inline"`
}

// GithubBindingList is a list of GithubBindings.
//
// +kubebuilder:object:root=true
type GithubBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GithubBinding `json:"items"`
}

// The types join the group-version's scheme as kubebuilder's own do
// (groupversion_info.go), for clients that decode them (the suite's
// k8sClient).
func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &GithubBinding{}, &GithubBindingList{})
		return nil
	})
}

// Example returns a valid GithubBinding namespace/name binding the workloads
// subject names, as a user would write it; the generated tests bind with
// it. Give every field you add to GithubBindingSpec a value here.
func Example(namespace, name string, subject tracker.Reference) *GithubBinding {
	return &GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "GithubBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       GithubBindingSpec{Subject: subject, Secret: SecretReference{Name: "github-token"}},
	}
}

// GithubBinding is a psbinding.Bindable: duck.Bindable (GetSubject,
// GetBindingStatus) plus Do and Undo.
var _ psbinding.Bindable = (*GithubBinding)(nil)

// GetSubject implements psbinding.Bindable. A subject without a namespace
// is in the Binding's own.
func (b *GithubBinding) GetSubject() tracker.Reference {
	ref := b.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	return ref
}

// GetBindingStatus implements psbinding.Bindable.
func (b *GithubBinding) GetBindingStatus() duck.BindableStatus { return &b.Status.Status }

// VolumeName is the pod volume Do adds, and MountPath where each container
// sees it.
const (
	VolumeName = "github-binding"
	MountPath  = "/var/bindings/github"
)

// Do mounts Spec.Secret into every container and init container of wp:
// the volume VolumeName, and a read-only mount of it at MountPath. It
// changes wp only, the same way each time, and never its receiver b,
// which others may read; on a workload it bound, it points the volume at
// the Secret named now.
func (b *GithubBinding) Do(ctx context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	volume := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: b.Spec.Secret.Name},
	}}
	if i := slices.IndexFunc(spec.Volumes, isVolume); i >= 0 {
		spec.Volumes[i] = volume
	} else {
		spec.Volumes = append(spec.Volumes, volume)
	}
	mount := corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true}
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			if j := slices.IndexFunc(c.VolumeMounts, isMount); j >= 0 {
				c.VolumeMounts[j] = mount
			} else {
				c.VolumeMounts = append(c.VolumeMounts, mount)
			}
		}
	}
}

// Undo removes exactly what Do added, and changes nothing on a workload Do
// never bound: lists it empties become nil again.
func (b *GithubBinding) Undo(ctx context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	spec.Volumes = nilIfEmpty(slices.DeleteFunc(spec.Volumes, isVolume))
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.VolumeMounts = nilIfEmpty(slices.DeleteFunc(c.VolumeMounts, isMount))
		}
	}
}

func isVolume(v corev1.Volume) bool     { return v.Name == VolumeName }
func isMount(m corev1.VolumeMount) bool { return m.Name == VolumeName }

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
