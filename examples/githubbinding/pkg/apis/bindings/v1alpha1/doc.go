// Package v1alpha1 is the GithubBinding API, group bindings.bindkit.dev,
// version v1alpha1: a Binding that mounts a Secret holding GitHub
// credentials into every container of its subjects, at
// /var/bindings/github.
//
// The Go types are all a Binding author writes by hand: GithubBinding with
// its Spec and Status (duck.Status inline), GetSubject, GetBindingStatus, Do
// and Undo. The deep-copy methods in zz_generated.deepcopy.go are generated,
// with config/300-githubbinding.yaml, by `bindkit generate` (controller-gen)
// from the markers below (`make generate`); there is no
// generated clientset, informer or lister, because bindkit's injection
// package serves custom resources through the dynamic client.
//
// +kubebuilder:object:generate=true
// +groupName=bindings.bindkit.dev
package v1alpha1
