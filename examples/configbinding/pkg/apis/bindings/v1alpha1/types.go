package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// ConfigBinding exposes Spec.Data as environment variables in every
// container of the workloads Spec.Subject names.
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
type ConfigBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigBindingSpec   `json:"spec"`
	Status ConfigBindingStatus `json:"status,omitempty"`
}

// ConfigBindingSpec is what a user asks of a ConfigBinding.
type ConfigBindingSpec struct {
	// Subject names the workloads to bind. An empty namespace means the
	// Binding's own.
	Subject tracker.Reference `json:"subject"`
	// Data are the environment variables, name to value.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_]*$'))",message="keys must be valid environment variable names"
	Data map[string]string `json:"data,omitempty"`
}

// ConfigBindingStatus is the observed state of a ConfigBinding.
type ConfigBindingStatus struct {
	duck.Status `json:",inline"`
}

// ConfigBindingList is a list of ConfigBindings.
//
// +kubebuilder:object:root=true
type ConfigBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ConfigBinding `json:"items"`
}
