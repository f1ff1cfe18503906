// Package psbinding makes PodSpec-able Bindings take effect: a Binding
// author's Do and Undo run on every subject a Binding names, by the
// admission controller when a subject is created or updated and by the
// BaseReconciler for subjects that already exist.
//
// The admission path looks Bindings up in an immutable index built from the
// listed Bindings: by exact subject (group, kind, namespace, name) and by
// label selector, the selectors of a namespace indexed by one key=value pair
// they require, so a lookup checks only the selectors the object's labels
// could satisfy. Bindings that match apply in the order of their
// namespace/name, whatever order they were listed in, so the same inputs
// always give the same patch and the reconciler never fights the webhook.
package psbinding
