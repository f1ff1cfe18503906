// Package policy programs the admission policies a Binding kind owns in the
// kube-apiserver (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
// and MutatingAdmissionPolicy, with their bindings) and keeps them as
// programmed.
//
// A Reconciler holds a fixed list of Objects, each one cluster-scoped object
// (or, for a BindingSet, a set of them) with a name and a desired spec. It writes only while its replica leads:
// a missing object is created, an object whose spec differs from the
// desired one (an operator's edit) is given back the desired spec, and
// labels and annotations others add are kept. Run it on a controller.Impl
// whose informers watch exactly those names (injection's named informer
// factory), so a deleted or edited object is healed within seconds.
//
// NamespaceGuard builds the first user of the machinery: a policy that
// refuses, at create and update, a Binding whose subject names another
// namespace, with a message naming both namespaces. The reconciler refuses
// such a Binding too (its Ready condition); the policy makes kubectl apply
// say so at once.
//
// MutatingPolicy builds the second: the MutatingAdmissionPolicy that
// admits the subjects of a declarative Binding kind (package declarative)
// in the kube-apiserver, from the Spec each Binding publishes in its
// status, or, for a kind whose users write the Spec in the Binding itself
// (MutatingPolicyOptions.SpecPath), from the Binding's current spec with
// no process running, in place of the webhook. MutatingPolicyBinding binds it once per
// Binding, with the Binding's namespace and subject selector as match
// resources, so that the kube-apiserver evaluates only the Bindings that
// can name an object; a BindingSet (an Object whose objects follow the
// listed Bindings) keeps those bindings programmed; RemoveMutatingPolicy
// removes the policy and all its bindings when the kind goes back to the
// webhook. When the webhook leaves the path, and when it comes back, is
// package wiring's: each path stays until the other is seen in force, by
// a probe through the kube-apiserver. Admission (ByPolicy, the default, or
// ByWebhook) is the process's choice, which package wiring reads when it
// builds a kind's admission (see wiring.Kind.Declarative).
package policy
