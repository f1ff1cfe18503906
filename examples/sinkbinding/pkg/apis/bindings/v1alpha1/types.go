package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/tracker"
)

// SinkBinding points the containers of the workloads Spec.Subject names at
// Spec.Sink.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=bindings
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.spec.sink`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.rollout.updated`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.rollout.total`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.rollout.wave`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SinkBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SinkBindingSpec    `json:"spec"`
	Status declarative.Status `json:"status,omitempty"`
}

// SinkBindingSpec is what a user asks of a SinkBinding.
type SinkBindingSpec struct {
	// Subject names the workloads to bind. An empty namespace means the
	// Binding's own.
	Subject tracker.Reference `json:"subject"`
	// Sink is the URL events are sent to, given to every container as
	// K_SINK.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="sink must be an http or https URL"
	Sink string `json:"sink"`
	// CACertsSecret, if set, names a Secret in the Binding's namespace
	// holding CA certificates to trust the sink with, mounted read-only at
	// CACertsPath in every container (init containers too) and named in
	// K_CA_CERTS.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	CACertsSecret string `json:"caCertsSecret,omitempty"`
	// ForwarderImage, if set, adds a sidecar of this image (named
	// ForwarderContainer) that the workload's containers may send events
	// through.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^\S+$`
	ForwarderImage string `json:"forwarderImage,omitempty"`
}

// SinkBindingList is a list of SinkBindings.
//
// +kubebuilder:object:root=true
type SinkBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SinkBinding `json:"items"`
}
