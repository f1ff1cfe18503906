// Package cli is kubectl-bindkit, kubectl's plugin for operators of
// Bindings, as a package its unit tests run in process (test/operator's
// control-plane tests build the command and run it, as operators do):
// Main takes the arguments and the output streams and returns the exit
// status.
//
//	kubectl bindkit plan TYPE/NAME                     what resuming a paused Binding would do
//	kubectl bindkit rollout status|pause|resume|undo TYPE/NAME
//	kubectl bindkit why TYPE/NAME                      what a workload carries of each Binding, or why none applies
//	kubectl bindkit audit [-A]                         records that are not the truth
//
// It takes kubectl's connection flags (--kubeconfig, --context, -n, --as,
// --request-timeout, --server, --token, ...) from k8s.io/cli-runtime's
// ConfigFlags, on a pflag.FlagSet, anywhere on the line, and prints
// tables, or -o json|yaml. A failure is one line naming what went wrong
// first (unreachable, refused, timed out, unauthorized, forbidden, not
// found); package main silences klog, so client-go logs nothing. The
// package is in a module of its own, so cli-runtime never enters the
// framework's dependencies.
//
// What it reads and writes is the framework's: the rollout annotations of package psbinding
// (RolloutPausedAnnotation, RolloutUndoAnnotation, RolloutHistoryAnnotation),
// a Binding's status (duck.Status: rollout, plan, conditions; a
// declarative kind's published Spec), the records on workloads (package
// duck), and package audit. The exit statuses are constants (ExitOK, ...),
// one meaning each.
package cli
