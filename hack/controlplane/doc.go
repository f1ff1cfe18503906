// Command controlplane runs a control plane for bindkit's integration
// tests and keeps it running until interrupted, so that a contributor runs
// one package's tests against it again and again without starting one
// each time (envtest's Shared attaches to it; see envtest.ControlPlaneEnv).
//
// From the repository root:
//
//	go run ./hack/controlplane            # make controlplane
//	export BINDKIT_CONTROL_PLANE=...      # the line it prints
//	go test -race -count=1 ./psbinding    # as often as you like
//
// By default it runs what most packages ask for: etcd, kube-apiserver with
// an audit log and webhook client authentication, and
// kube-controller-manager; -workloads adds kube-scheduler and kwok's nodes
// for the packages that run pods (test/e2e, test/rollout, test/operator,
// test/demo, test/faults/rollout), and -minor 1.36 runs the older minor.
// A package that asks for more than the control plane runs fails at once,
// saying what is missing. CONTRIBUTING.md, "The test loop", says how much
// it saves.
package main
