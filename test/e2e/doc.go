// Package e2e tests what runs: the example githubbinding controller, built
// and started as users run it, binds workloads on a control plane with
// workloads (envtest's Workloads option: kube-scheduler and kwok's fake
// nodes), and the tests look at the pods that result, not only at the
// templates bindkit patches.
package e2e
