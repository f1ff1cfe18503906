// Package v1alpha1 is the walkthrough's GithubBinding API, group
// walkthrough.bindkit.dev, version v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=walkthrough.bindkit.dev
package v1alpha1
