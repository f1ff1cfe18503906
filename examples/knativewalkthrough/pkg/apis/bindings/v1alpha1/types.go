package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// GithubBinding mounts the Secret Spec.Secret names into the containers of
// the workloads Spec.Subject names.
//
// +kubebuilder:object:root=true
type GithubBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GithubBindingSpec   `json:"spec,omitempty"`
	Status GithubBindingStatus `json:"status,omitempty"`
}

// GithubBindingSpec is what a user asks of a GithubBinding.
type GithubBindingSpec struct {
	// Subject names the workloads to bind, by name or by label selector.
	Subject tracker.Reference `json:"subject"`
	// Secret names a Secret in the Binding's namespace.
	Secret corev1.LocalObjectReference `json:"secret"`
}

// GithubBindingStatus is the status the framework manages.
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
