package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the API, as test/declaredbinding/config/300-declaredbinding.yaml
// declares them.
const (
	// GroupName is the API group of DeclaredBinding.
	GroupName = "declared.bindkit.dev"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// Kind is the kind of DeclaredBinding.
	Kind = "DeclaredBinding"
	// Resource is the plural the API server serves DeclaredBindings under.
	Resource = "declaredbindings"
)

// SchemeGroupVersion is the group and version of this package's types.
// Treat it as a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource returns declaredbindings.declared.bindkit.dev/v1alpha1.
func GroupVersionResource() schema.GroupVersionResource {
	return SchemeGroupVersion.WithResource(Resource)
}

// AddToScheme registers DeclaredBinding and DeclaredBindingList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &DeclaredBinding{}, &DeclaredBindingList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
