// Package webhookfaults runs the githubbinding controller binary, as users
// run it, against a real kube-apiserver and breaks what its webhook depends
// on: the certificates Secret (deleted, its CA key removed) during a burst
// of creates, the MutatingWebhookConfiguration (edited, deleted and
// re-applied from config/), and the process itself (stopped, with
// failurePolicy Fail), to show admissions keep succeeding, the
// configuration heals and the webhook is called only where Bindings apply.
// Its subpackage outage makes the Secret unwritable while rotations are
// due.
//
// Harness, the code both share, installs config/'s webhook configuration
// reached by URL on 127.0.0.1, starts and stops the binary, and drives
// load through the kube-apiserver.
package webhookfaults
