// Package wiring connects a Binding kind to the process: start from New.
// One call from the kind's Go type builds its controller and its
// admission, on whichever path the kind and the cluster allow.
//
//	kind, err := wiring.New[v1alpha1.EnvBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
//	if err != nil { ... }
//	sharedmain.Main("envbinding-controller", kind.Controller, kind.Webhook)
//
// New takes the Binding's Go type (a psbinding.Bindable: Do, Undo, a
// subject, a status) and its resource, and returns a Kind: the
// controller that binds existing subjects (a psbinding.BaseReconciler)
// and the admission controller that binds new ones and programs the
// webhook configuration (a psbinding.AdmissionReconciler), both
// configured from one psbinding.Settings built from Options, so the two
// paths agree on where and how they bind. Every field of Options is
// optional, with the default its comment names; New reports every bad
// one at once, naming it.
//
// The rest of the package is for authors who wire a kind field by field,
// as knative's walkthrough does: NewReconcilerImpl completes a
// BaseReconciler from the context, NewAdmissionController builds the
// admission controller with knative's arguments (its AdmissionOptions are
// the functional options knative's had, kept for that reason), and
// ExcludedNamespaces says where the process's webhook is never called.
// All of them read clients, informers and the system namespace from the
// context package injection fills, as sharedmain does.
package wiring
