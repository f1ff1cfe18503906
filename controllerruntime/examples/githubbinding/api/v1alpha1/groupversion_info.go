// Package v1alpha1 holds the bindings.bindkit.dev/v1alpha1 API: its types,
// their markers (read by make manifests and make generate) and their
// scheme.
// +kubebuilder:object:generate=true
// +groupName=bindings.bindkit.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's types.
	GroupVersion = schema.GroupVersion{Group: "bindings.bindkit.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion, under the name code generators
	// look for.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder collects the functions that add this package's types
	// to a scheme; each type file registers its own.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
