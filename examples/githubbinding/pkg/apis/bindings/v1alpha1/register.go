package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the API, as config/300-githubbinding.yaml declares them.
const (
	// GroupName is the API group of GithubBinding.
	GroupName = "bindings.bindkit.dev"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// Kind is the kind of GithubBinding.
	Kind = "GithubBinding"
	// Resource is the plural the API server serves GithubBindings under.
	Resource = "githubbindings"
)

// SchemeGroupVersion is the group and version of this package's types.
// Treat it as a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource returns githubbindings.bindings.bindkit.dev/v1alpha1,
// the resource the controller lists, watches and patches.
func GroupVersionResource() schema.GroupVersionResource {
	return SchemeGroupVersion.WithResource(Resource)
}

// AddToScheme registers GithubBinding and GithubBindingList with s, for
// code that resolves kinds through a scheme (an event recorder, say). There
// is no package-level scheme builder: callers decide which scheme knows
// the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &GithubBinding{}, &GithubBindingList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
