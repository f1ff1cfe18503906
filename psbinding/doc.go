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
// webhook never fights the reconciler.
//
// Admit decodes a matched object as the kube-apiserver does (field names
// match case-sensitively; a field given twice is a 400) and only after a
// scan that allocates nothing: an object beyond one of the webhook's
// ObjectLimits (containers, volumes, env and volumeMounts per container,
// nesting depth) is refused with a 413 that names the limit and its flag,
// and the object's estimated decoded size is reserved from the webhook's
// memory budget before decoding (webhook.Reserve; no room is answered 429,
// which the kube-apiserver retries). A patch larger than MaxPatchBytes is a
// 413 naming the Bindings. Do and Undo never see managedFields.
//
// A subject whose shape finds no pod template at its path (the field is
// absent or null, duck.ErrNoPodTemplate) is never patched: a template added
// where the kind's schema keeps none would be pruned, and binding it would
// never settle. Admit allows it unchanged, with a warning that names the
// Bindings, the kind and the path and says to declare the kind's shape
// (duck.Shapes.With and duck.TemplateAt). A template that is present but
// not an object is a 400.
//
// On the leader, the same reconcile
// programs the MutatingWebhookConfiguration: rules for the subjects' main
// resources, the CA bundle, the handler path, and namespace and object
// selectors in exclusion (ExcludeLabel) or inclusion (IncludeLabel) mode,
// with the system namespace always excluded. NewAdmissionController builds
// it from a context; NewAdmissionReconciler from an explicit AdmissionConfig.
package psbinding
