package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of this package's types, as
// config/githubbinding.yaml declares them. Treat it as a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: "walkthrough.bindkit.dev", Version: "v1alpha1"}

// AddToScheme registers GithubBinding and GithubBindingList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &GithubBinding{}, &GithubBindingList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
