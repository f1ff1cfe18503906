// Package sinkbinding runs SinkBindings, a declarative Binding kind: New
// wires it with wiring.New and nothing else. Its Controller binds existing
// subjects and publishes each Binding's declared Spec; its Webhook admits
// new subjects by MutatingAdmissionPolicy where the kube-apiserver serves
// one (no webhook server, no certificates), by the webhook otherwise or
// under --declarative-admission=webhook.
package sinkbinding
