// Package cli is kubectl-bindkit, kubectl's plugin for operators of
// Bindings, as a package its tests (and the control-plane tests of
// test/operator) run in process: Main takes the arguments and the output
// streams and returns the exit status.
//
//	kubectl bindkit plan TYPE/NAME                     what resuming a paused Binding would do
//	kubectl bindkit rollout status|pause|resume|undo TYPE/NAME
//	kubectl bindkit why TYPE/NAME                      the Bindings recorded on a workload
//	kubectl bindkit audit [-A]                         records that are not the truth
//
// It reads the kubeconfig as kubectl does (--kubeconfig, --context, -n,
// -A) and prints tables, or -o json|yaml. What it reads and writes is the
// framework's: the rollout annotations of package psbinding
// (RolloutPausedAnnotation, RolloutUndoAnnotation, RolloutHistoryAnnotation),
// a Binding's status (duck.Status: rollout, plan, conditions; a
// declarative kind's published Spec), the records on workloads (package
// duck), and package audit. The exit statuses are constants (ExitOK, ...),
// one meaning each.
package cli
