// Package knativewalkthrough is the GithubBinding of knative.dev/pkg's
// psbinding README, written the knative way (the reconciler's fields set
// one by one, a knative-shaped constructor, sharedmain.MainWithContext) and
// ported to bindkit by MIGRATING.md. Its test binds a Deployment against a
// real kube-apiserver, so the guide cannot go stale.
//
// The package layout follows the walkthrough's: the API type with Do and
// Undo in pkg/apis/bindings/v1alpha1, the volume constants in pkg/github,
// NewController, NewWebhook and ListAll in pkg/reconciler/githubbinding, and
// main in cmd/webhook. For a new Binding, start from examples/githubbinding,
// which uses bindkit's recommended constructors instead.
package knativewalkthrough
