package v1alpha1

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// DeclaredBinding adds Spec.Declare to the pod templates of the workloads
// Spec.Subject names.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=bindings
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeclaredBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeclaredBindingSpec `json:"spec"`
	Status declarative.Status  `json:"status,omitempty"`
}

// DeclaredBindingSpec is what a user asks of a DeclaredBinding.
type DeclaredBindingSpec struct {
	// Subject names the workloads to bind. An empty namespace means the
	// Binding's own.
	Subject tracker.Reference `json:"subject"`
	// Declare is what the Binding adds to each workload's pod template:
	// env entries, envFrom sources, volumes and mounts, containers and init
	// containers. The kube-apiserver validates it at the Binding's write.
	// +optional
	Declare declarative.Spec `json:"declare,omitempty"`
}

// DeclaredBindingList is a list of DeclaredBindings.
//
// +kubebuilder:object:root=true
type DeclaredBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []DeclaredBinding `json:"items"`
}

var (
	_ psbinding.Bindable        = (*DeclaredBinding)(nil)
	_ psbinding.StatusPublisher = (*DeclaredBinding)(nil)
	_ declarative.InBinding     = (*DeclaredBinding)(nil)
)

// GetSubject implements duck.Bindable; an empty namespace is the Binding's.
func (b *DeclaredBinding) GetSubject() tracker.Reference {
	ref := b.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	return ref
}

// GetBindingStatus implements duck.Bindable.
func (b *DeclaredBinding) GetBindingStatus() duck.BindableStatus { return &b.Status.Status }

// Declare implements declarative.Declarer: the Spec as the user wrote it.
func (b *DeclaredBinding) Declare() declarative.Spec { return b.Spec.Declare }

// DeclaredPath implements declarative.InBinding: where Declare's Spec is.
func (b *DeclaredBinding) DeclaredPath() string { return "spec.declare" }

// Do implements psbinding.Bindable with the declared Spec.
func (b *DeclaredBinding) Do(_ context.Context, wp *duck.WithPod) { b.Declare().Do(wp) }

// Undo implements psbinding.Bindable with the declared Spec.
func (b *DeclaredBinding) Undo(_ context.Context, wp *duck.WithPod) { b.Declare().Undo(wp) }

// PublishStatus implements psbinding.StatusPublisher: the declared Spec,
// in status.declared, for operators.
func (b *DeclaredBinding) PublishStatus() { b.Status.Publish(b.Generation, b.Declare()) }
