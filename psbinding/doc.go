// Package psbinding makes PodSpec-able Bindings take effect: a Binding
// author's Do and Undo run on every subject a Binding names, by the
// admission controller when a subject is created or updated, and by the
// BaseReconciler for subjects that already exist.
//
// A Binding type implements Bindable: duck.Bindable (its subject reference
// and status) plus Do and Undo on a *duck.WithPod, the subject's pod
// template whatever the subject's kind. Both must be idempotent.
//
// # The reconcile path
//
// BaseReconciler reconciles one Binding kind. On first sight it adds a
// finalizer; it resolves the subject's resource through a RESTMapper, tracks
// the subject (by name or selector) so that a subject's change reconciles
// the Binding again, applies Do to each selected subject and Undo to those
// that left the selection, and patches them with JSON patches that test the
// subject's resourceVersion, re-reading and retrying on conflict. It records
// a Ready condition with a reason, writes status only when it changed, and
// emits an event for each failure. A deleted Binding is unbound from every
// subject before its finalizer goes. Kinds whose pod template cannot change
// in place (bare Pods, Jobs) are bound at admission only, and the condition
// says so. NewReconcilerImpl wires a BaseReconciler from a context built by
// package injection; its fields can also be set one by one, as in knative's
// walkthrough.
//
// # The admission path
//
// AdmissionController lists all Bindings on every change and builds an
// immutable index of them, swapped in atomically: by exact subject (group,
// kind, namespace, name) and by label selector, the selectors of a
// namespace filed under one key=value pair they require, so a lookup checks
// only the selectors the object's labels could satisfy. Admit lets through
// untouched every request no Binding can concern (other operations,
// subresources, kinds or namespaces without Bindings) before decoding the
// object, and otherwise answers with the JSON patch of Do (or Undo, for a
// Binding being deleted) applied in the order of the Bindings'
// namespace/name, so the same inputs always give the same patch and the
// webhook never fights the reconciler. On the leader, the same reconcile
// programs the MutatingWebhookConfiguration: rules for the subjects' main
// resources, the CA bundle (it is the one writer of caBundle, and the
// certificates.Publisher the certificates reconciler waits for), the
// handler path, and namespace and object selectors that let the
// kube-apiserver call the webhook only in the namespaces holding a Binding
// of the kind (never the system namespace, nor KubeNamespaces unless opted
// in), minus those labelled ExcludeLabel, and in inclusion mode only those
// labelled IncludeLabel. It watches the configuration and restores what it
// owns within seconds of an edit, keeping what the administrator owns.
// NewAdmissionController builds it from a context; NewAdmissionReconciler
// from an explicit AdmissionConfig.
package psbinding
