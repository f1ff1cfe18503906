// Package declarative is the data form of a Binding: a Spec says what a
// Binding adds to the pod template of its subjects (env entries, envFrom
// sources, volumes, volume mounts, containers and init containers), and
// bindkit derives Do and Undo from it, so Undo always removes exactly what
// Do added.
//
// A Binding kind computes its Spec from the Binding (Declarer), keeps a
// Status, and implements psbinding.Bindable and psbinding.StatusPublisher
// with one-line methods:
//
//	func (b *EnvBinding) Do(_ context.Context, wp *duck.WithPod)   { b.Declare().Do(wp) }
//	func (b *EnvBinding) Undo(_ context.Context, wp *duck.WithPod) { b.Declare().Undo(wp) }
//	func (b *EnvBinding) PublishStatus()                           { b.Status.Publish(b.Generation, b.Declare()) }
//
// It is then reconciled like any other kind (wiring.New), and the contract
// kit checks it like any other. Its subjects are admitted by the
// kube-apiserver's MutatingAdmissionPolicy (package policy), which reads
// the Spec the controller published in status.declared, where the
// kube-apiserver serves one; by the webhook otherwise.
// examples/sinkbinding is a complete kind. Identity is by name: an env
// entry, volume or container of the Spec replaces one of the same name that
// the workload already has (and Undo removes it; the workload's own value is
// not remembered), a volume mount replaces one at the same mountPath, an
// envFrom source is added once. Keep the names a Spec uses to the Binding
// (a prefix of its kind, say).
//
// Undo removes what the Spec it is given names. A Binding whose Spec
// changes names (an env entry renamed) leaves the old names on subjects
// bound before the change; keep names fixed and let values change.
package declarative
