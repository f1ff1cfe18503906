// Package githubbinding is the knative walkthrough's controller package,
// ported to bindkit: NewController sets psbinding.BaseReconciler's fields
// one by one and builds its Impl with controller.NewContext, NewWebhook
// calls wiring.NewAdmissionController (knative's psbinding.NewAdmissionController), and ListAll feeds it. Each line
// that an import change alone did not port says so in a comment starting
// "knative:"; MIGRATING.md lists them.
package githubbinding
