// Package upgrade swaps the githubbinding example controller of the
// release before (v0.5.0, commit 0b55854, built from git history inside
// the test) and of this tree, both ways, on a control plane that runs the
// pods of the Deployments it binds (envtest's Workloads: kube-scheduler
// and kwok's nodes), under load: Deployments created, a Binding edited
// and a rollout in flight while the controllers change, as a Deployment
// of the controller rolls from one image to the other (the next replica
// started and serving before the previous one stops, a Service in front).
// It counts what the swap did to workloads that nothing else changed
// (generations moved, pods restarted, records rewritten: none allowed),
// checks that each edited or paced subject moved exactly once, that a
// Binding deleted under either release leaves nothing behind, and ends
// each phase with the audit (bindingtest.Audit).
//
// The release is built from the repository's history, so the test needs
// git and a clone that holds the commit: CI's full clone of main has it;
// elsewhere, without them, the test skips saying so (under CI=true it
// fails).
package upgrade
