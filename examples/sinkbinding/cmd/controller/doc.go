// Command controller runs the SinkBinding controller. Where the
// kube-apiserver serves MutatingAdmissionPolicy, it admits SinkBindings'
// subjects by policy and serves no webhook (its health probes are on
// --probe-port); with --declarative-admission=webhook, or where the policy
// is not served, it runs the admission webhook too.
package main
