// Package audit checks, on a live cluster, that what bindkit records on
// workloads is the truth: that every record (duck.BoundAnnotation and the
// rollout's records, duck.RolloutAnnotation, duck.RollbackAnnotation,
// duck.HeldAnnotation) names a Binding that exists, with its UID, at a
// generation it has reached; that a subject carries the change of the
// generation it records, where the audit can run the Binding's Do (a
// declarative kind's published Spec, or a Kind the caller gives); that a
// rollback record undoes what the subject carries; and that no hold
// outlives the rollout that should have lifted it.
//
// Run returns the Findings, each with a JSON merge patch that makes the
// record the truth (the record removed, so that the Binding's reconciler,
// where the Binding exists, binds the subject again) and the same as a
// kubectl command; Apply sends one. bindingtest.Audit runs it at the end
// of a test; `bindkit audit` and `kubectl bindkit audit` run it from the
// command line.
package audit
