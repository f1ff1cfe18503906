package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the API, as examples/sinkbinding/config/300-sinkbinding.yaml
// declares them.
const (
	// GroupName is the API group of SinkBinding.
	GroupName = "bindings.bindkit.dev"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// Kind is the kind of SinkBinding.
	Kind = "SinkBinding"
	// Resource is the plural the API server serves SinkBindings under.
	Resource = "sinkbindings"
)

// SchemeGroupVersion is the group and version of this package's types.
// Treat it as a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource returns sinkbindings.bindings.bindkit.dev/v1alpha1.
func GroupVersionResource() schema.GroupVersionResource {
	return SchemeGroupVersion.WithResource(Resource)
}

// AddToScheme registers SinkBinding and SinkBindingList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &SinkBinding{}, &SinkBindingList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
