// Package rollout tests progressive rollouts (psbinding.RolloutPolicy)
// against a control plane that runs workloads (kube-scheduler, kwok nodes,
// the workload controllers), through the sinkbinding example binary with
// its default flags and the policy in each Binding's annotations: waves
// bounded by the policy, a halt on pods that never become Ready with its
// rollback and its resumption once the Binding is fixed, edits coalesced,
// and no change without a policy.
package rollout
