package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// GithubBinding mounts the Secret Spec.Secret names into every container
// and init container of the workloads Spec.Subject names.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=bindings
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.rollout.updated`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.rollout.total`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.rollout.wave`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GithubBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GithubBindingSpec   `json:"spec"`
	Status GithubBindingStatus `json:"status,omitempty"`
}

// GithubBindingSpec is what a user asks of a GithubBinding.
//
// +kubebuilder:validation:XValidation:rule="has(self.secret.name) && size(self.secret.name) > 0",message="spec.secret.name is required"
type GithubBindingSpec struct {
	// Subject names the workloads to bind: one by name, or all that match a
	// label selector. An empty namespace means the Binding's own.
	Subject tracker.Reference `json:"subject"`
	// Secret names a Secret in the Binding's namespace, typically with the
	// keys "token" (a GitHub access token) and optionally "webhook-secret".
	Secret corev1.LocalObjectReference `json:"secret"`
}

// GithubBindingStatus is the observed state of a GithubBinding: the Ready and
// BindingAvailable conditions the framework manages.
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
