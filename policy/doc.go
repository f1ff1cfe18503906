// Package policy programs the admission policies a Binding kind owns in the
// kube-apiserver (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
// and its binding today; the MutatingAdmissionPolicy of declarative kinds
// next) and keeps them as programmed.
//
// A Reconciler holds a fixed list of Objects, each one cluster-scoped object
// with a name and a desired spec. It writes only while its replica leads:
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
package policy
