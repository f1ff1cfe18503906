// Package operator holds the tests of an operator's controls of Binding
// rollouts (plan, pause, resume, undo, why) through the sinkbinding
// example binary with its default flags and the kubectl-bindkit commands
// (package cmd/kubectl-bindkit/cli), on a control plane whose nodes run
// pods (kwok).
package operator
